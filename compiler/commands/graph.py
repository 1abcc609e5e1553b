"""Draw a playbook: the steps view (default) or the full Petri net, as DOT or Mermaid.

    noetlc graph playbook.yaml --format mermaid
    noetlc graph playbook.yaml --format dot --level net | dot -Tsvg > net.svg

AND-joins are diamonds labelled with their (inferred or explicit) kind, final steps have a
double border, failure arcs are dashed, dead-path transitions dotted (net view).
"""

from __future__ import annotations

import argparse
import sys

from noetlc.compiler.commands.artifacts import load_payload
from noetlc.ir.graph import to_dot, to_mermaid


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="FILE.yaml or FILE.nbc")
    p.add_argument("--format", choices=("dot", "mermaid"), default="dot")
    p.add_argument("--level", choices=("steps", "net"), default="steps")


def run(args: argparse.Namespace) -> int:
    payload = load_payload(args.file)
    if payload is None:
        return 1
    try:
        text = (
            to_dot(payload, args.level) if args.format == "dot" else to_mermaid(payload, args.level)
        )
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        print(
            f"{args.file}:1:1: error[NOE702]: the bytecode is malformed ({type(exc).__name__}: {exc})",
            file=sys.stderr,
        )
        return 1
    sys.stdout.write(text)
    return 0
