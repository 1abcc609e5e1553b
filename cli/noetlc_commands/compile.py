"""Compile a playbook to bytecode (`.nbc`), or show what a pass produced.

    noetlc compile playbook.yaml -o playbook.nbc
    noetlc compile playbook.yaml --dump-after desugar     # the canonical YAML
    noetlc compile playbook.yaml --dump-after all         # every stage
    noetlc compile playbook.yaml --emit ir                # the Petri net's text form

The bytecode goes to FILE with the suffix .nbc unless -o says otherwise; an output that would
overwrite the input is refused. With --emit or --dump-after, the text goes to -o FILE when
given, else to standard output. Exit status: 0 compiled, 1 the playbook has errors, 2 usage
errors (an output that cannot be written, or that is the input).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from noetlc.cli.common import UsageError
from noetlc.compiler.pipeline import compile_file, pass_names
from noetlc.compiler.tree_dump import dump_tree
from noetlc.compiler.unit import CompilationUnit
from noetlc.diagnostics.errors import InternalCompilerError
from noetlc.diagnostics.report import render_text
from noetlc.ir.dis import disassemble
from noetlc.ir.net import dump


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the playbook (.yaml)")
    p.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="write the bytecode (or the --emit/--dump-after text) here (default: FILE with .nbc)",
    )
    p.add_argument(
        "--dump-after",
        metavar="PASS",
        choices=[*pass_names(), "all"],
        help="print the output of a pass (or of every pass)",
    )
    p.add_argument(
        "--emit",
        choices=("ir", "bytecode"),
        help="print the net (ir) or the disassembly (bytecode) instead of writing",
    )


def stage_text(name: str, unit: CompilationUnit) -> str | None:
    if name == "load" and unit.document is not None:
        return yaml.safe_dump(unit.document.to_python(), sort_keys=False)
    if name == "desugar" and unit.canonical is not None:
        return yaml.safe_dump(unit.canonical.to_python(), sort_keys=False)
    if name == "normalize" and unit.playbook is not None:
        return dump_tree(unit.playbook)
    if name == "expressions" and unit.pool is not None:
        entries = unit.pool.entries
        return "".join(f"e{i} {e.mode} {e.kind} {e.source!r}\n" for i, e in enumerate(entries))
    if name == "net" and unit.net is not None:
        return dump(unit.net)
    if name in ("lower", "assemble") and unit.program is not None:
        return disassemble(unit.program)
    return None


def run(args: argparse.Namespace) -> int:
    dumps: list[str] = []

    def after(name: str, unit: CompilationUnit) -> None:
        if args.dump_after in (name, "all"):
            text = stage_text(name, unit)
            if text is not None:
                dumps.append(f"# after {name}\n{text}" if args.dump_after == "all" else text)

    out = Path(args.output) if args.output else None
    if out is None and not (args.emit or args.dump_after):
        out = Path(args.file).with_suffix(".nbc")
    if out is not None and _same_file(out, Path(args.file)):
        raise UsageError(
            "NOE802",
            f"the output {out} is the input file: compiling would overwrite the playbook",
            "name the output with -o FILE.nbc (a .nbc input needs no compiling: `noetl-vm run`"
            " and `noetlc dis` read it)",
        )
    unit = compile_file(args.file, after_each=after)
    diagnostics = unit.reporter.sorted()
    if diagnostics:
        print(render_text(diagnostics, {unit.file: unit.source}), file=sys.stderr)
    if unit.reporter.has_errors:
        return 1
    if dumps:
        return _emit("\n".join(dumps), out)
    if unit.net is None or unit.program is None:
        raise InternalCompilerError("the pipeline ended without bytecode and without an error")
    if args.emit == "ir":
        return _emit(dump(unit.net), out)
    if args.emit == "bytecode":
        return _emit(disassemble(unit.program), out)
    assert out is not None
    data = unit.program.nbc
    _write(out, data)
    print(f"wrote {out} ({len(data)} bytes)", file=sys.stderr)
    return 0


def _same_file(out: Path, source: Path) -> bool:
    try:
        return out.resolve() == source.resolve() or (out.exists() and out.samefile(source))
    except OSError:
        return False


def _emit(text: str, out: Path | None) -> int:
    """Text to -o FILE, or to standard output."""
    if out is None:
        sys.stdout.write(text)
        return 0
    _write(out, text.encode("utf-8"))
    print(f"wrote {out} ({len(text)} characters)", file=sys.stderr)
    return 0


def _write(out: Path, data: bytes) -> None:
    try:
        out.write_bytes(data)
    except OSError as exc:
        raise UsageError(
            "NOE802", f"cannot write {out}: {exc.strerror or type(exc).__name__}", None
        ) from None
