"""Shared by `compile`, `dis`, `graph`, `run` and `submit`: get the program of a .yaml or a
.nbc."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from noetlc.ir import nbc
from noetlc.ir.program import Program

if TYPE_CHECKING:
    from noetlc.compiler.unit import CompilationUnit


def load_program(path: str, use_cache: bool = False) -> Program | None:
    """The verified program of a playbook (compiled) or of a bytecode file (decoded and
    verified); print located errors and return None. With `use_cache`, a playbook's program
    comes from the compile cache when it holds one (decoded and verified like a `.nbc`
    file), and a new compile is kept there."""
    if use_cache and not path.endswith(".nbc"):
        from noetlc.cli import compile_cache

        read = compile_cache.read_source(path)
        entry_key = compile_cache.key("program", path, read[0]) if read is not None else None
        if entry_key is not None:
            entry = compile_cache.load(entry_key)
            if entry is not None:
                try:
                    return Program.decode(entry.body)
                except nbc.BytecodeError:  # a damaged or foreign entry: compile again
                    pass
        unit = _compile(path)
        if unit is None:
            return None
        if entry_key is not None and read is not None:
            _keep(entry_key, read[1], unit)
        return unit.program
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
    unit = _compile(path)
    return None if unit is None else unit.program


def _compile(path: str) -> CompilationUnit | None:
    """The compilation of `path`, or None after printing its errors."""
    from noetlc.compiler.pipeline import compile_file  # a .nbc file needs no compiler
    from noetlc.diagnostics.report import render_text

    unit = compile_file(path)
    if unit.reporter.has_errors or unit.program is None:
        print(render_text(unit.reporter.sorted(), {unit.file: unit.source}), file=sys.stderr)
        return None
    return unit


def _keep(entry_key: str, source: str, unit: CompilationUnit) -> None:
    """Keep a compiled program in the compile cache (not when the source changed while it
    was compiled, nor when the compile looked up installed tool plugins)."""
    from noetlc.cli import compile_cache
    from noetlc.stdlib_tools.kinds import plugins_loaded

    if plugins_loaded() or unit.source != source or unit.program is None:
        return
    compile_cache.store(entry_key, unit.reporter.sorted(), unit.program.nbc)  # kept on it


def render_program(path: str, render: Callable[[Program], str]) -> int:
    """Load or compile `path`, render it, print it (a `.nbc` file is verified first)."""
    program = load_program(path)
    if program is None:
        return 1
    try:
        text = render(program)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        print(
            f"{path}:1:1: error[NOE702]: the bytecode is malformed ({type(exc).__name__}: {exc})",
            file=sys.stderr,
        )
        return 1
    sys.stdout.write(text)
    return 0
