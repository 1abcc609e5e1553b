"""Draw a playbook: the steps view (default) or the full Petri net, as DOT or Mermaid; or
export it for model checkers: the Petri net as PNML, lint's token system as Promela (SPIN).

    noetlc graph playbook.yaml --format mermaid
    noetlc graph playbook.yaml --format dot --level net | dot -Tsvg > net.svg
    noetlc graph playbook.yaml --format pnml > net.pnml
    noetlc graph playbook.yaml --format promela > net.pml && spin -a net.pml

AND-joins are diamonds labelled with their (inferred or explicit) kind, final steps have a
double border, failure arcs are dashed, dead-path transitions dotted (net view).
"""

from __future__ import annotations

import argparse
import sys

from noetlc.cli.noetlc_commands.artifacts import render_program
from noetlc.ir.graph import to_dot, to_mermaid
from noetlc.ir.program import Program


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="FILE.yaml or FILE.nbc")
    p.add_argument("--format", choices=("dot", "mermaid", "pnml", "promela"), default="dot")
    p.add_argument("--level", choices=("steps", "net"), default="steps")


def run(args: argparse.Namespace) -> int:
    if args.format in ("pnml", "promela"):
        return _export(args.file, args.format)

    def render(program: Program) -> str:
        if args.format == "dot":
            return to_dot(program, args.level)
        return to_mermaid(program, args.level)

    return render_program(args.file, render)


def _export(path: str, fmt: str) -> int:
    """PNML and Promela come from the compiled net (and lint's model of it): a YAML file."""
    from noetlc.analysis.lint import context_of
    from noetlc.analysis.promela import export
    from noetlc.compiler.pipeline import compile_file
    from noetlc.diagnostics.report import render_text
    from noetlc.ir.pnml import to_pnml

    if path.endswith(".nbc"):
        print(
            f"{path}:1:1: error[NOE800]: --format {fmt} needs the playbook's YAML, not bytecode\n"
            "  hint: pass the .yaml file the .nbc was compiled from",
            file=sys.stderr,
        )
        return 2
    unit = compile_file(path, until="net")
    if unit.reporter.has_errors or unit.net is None:
        print(render_text(unit.reporter.sorted(), {unit.file: unit.source}), file=sys.stderr)
        return 1
    if fmt == "pnml":
        pool = unit.pool.entries if unit.pool is not None else []
        sys.stdout.write(to_pnml(unit.net, [e.source for e in pool]))
        return 0
    ctx = context_of(unit)
    if ctx is None:
        return 1
    sys.stdout.write(export(ctx))
    return 0
