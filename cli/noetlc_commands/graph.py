"""Draw a playbook: the steps view (default) or the full Petri net, as DOT or Mermaid.

    noetlc graph playbook.yaml --format mermaid
    noetlc graph playbook.yaml --format dot --level net | dot -Tsvg > net.svg

AND-joins are diamonds labelled with their (inferred or explicit) kind, final steps have a
double border, failure arcs are dashed, dead-path transitions dotted (net view).
"""

from __future__ import annotations

import argparse
from typing import Any

from noetlc.cli.noetlc_commands.artifacts import render_payload
from noetlc.ir.graph import to_dot, to_mermaid


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="FILE.yaml or FILE.nbc")
    p.add_argument("--format", choices=("dot", "mermaid"), default="dot")
    p.add_argument("--level", choices=("steps", "net"), default="steps")


def run(args: argparse.Namespace) -> int:
    def render(payload: dict[str, Any]) -> str:
        if args.format == "dot":
            return to_dot(payload, args.level)
        return to_mermaid(payload, args.level)

    return render_payload(args.file, render)
