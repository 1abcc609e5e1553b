"""Shared by `compile`, `dis` and `graph`: get a compiled payload from a .yaml or a .nbc."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from noetlc.ir import nbc
from noetlc.ir.program import Program


def load_payload(path: str) -> dict[str, Any] | None:
    """Compile a playbook or read a bytecode file; print located errors and return None."""
    program = load_program(path)
    return None if program is None else program.to_payload()


def load_program(path: str) -> Program | None:
    """The verified program of a playbook (compiled) or of a bytecode file (decoded and
    verified); print located errors and return None."""
    if path.endswith(".nbc"):
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            print(f"{path}:1:1: error[NOE004]: cannot read {path}: {exc.strerror}", file=sys.stderr)
            return None
        try:
            program = Program.decode(data)  # verified (NOE701-704)
        except nbc.BytecodeError as exc:
            print(f"{path}:1:1: error[{exc.code}]: {exc}", file=sys.stderr)
            if exc.hint:
                print(f"  hint: {exc.hint}", file=sys.stderr)
            return None
        return program
    from noetlc.compiler.pipeline import compile_file  # a .nbc file needs no compiler
    from noetlc.diagnostics.report import render_text

    unit = compile_file(path)
    if unit.reporter.has_errors or unit.program is None:
        print(render_text(unit.reporter.sorted(), {unit.file: unit.source}), file=sys.stderr)
        return None
    return unit.program


def render_payload(path: str, render: Callable[[dict[str, Any]], str]) -> int:
    """Load or compile `path`, render it, print it (a `.nbc` file is verified first)."""
    payload = load_payload(path)
    if payload is None:
        return 1
    try:
        text = render(payload)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        print(
            f"{path}:1:1: error[NOE702]: the bytecode is malformed ({type(exc).__name__}: {exc})",
            file=sys.stderr,
        )
        return 1
    sys.stdout.write(text)
    return 0
