"""Draw a playbook: the steps view (default) or the full Petri net, as DOT or Mermaid.

    noetlc graph playbook.yaml --format mermaid
    noetlc graph playbook.yaml --format dot --level net | dot -Tsvg > net.svg

AND-joins are diamonds labelled with their (inferred or explicit) kind, final steps have a
double border, failure arcs are dashed, dead-path transitions dotted (net view).
"""

from __future__ import annotations

import argparse

from noetlc.cli.noetlc_commands.artifacts import render_program
from noetlc.ir.graph import to_dot, to_mermaid
from noetlc.ir.program import Program


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="FILE.yaml or FILE.nbc")
    p.add_argument("--format", choices=("dot", "mermaid"), default="dot")
    p.add_argument("--level", choices=("steps", "net"), default="steps")


def run(args: argparse.Namespace) -> int:
    def render(program: Program) -> str:
        if args.format == "dot":
            return to_dot(program, args.level)
        return to_mermaid(program, args.level)

    return render_program(args.file, render)
