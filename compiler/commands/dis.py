"""Disassemble a playbook's bytecode: every instruction with the YAML line it came from.

Takes a `.nbc` file or a `.yaml` playbook (compiled on the fly). Jump targets are marked
`>>`; expressions are shown with their source; join kinds are listed first.
"""

from __future__ import annotations

import argparse
import sys

from noetlc.compiler.commands.artifacts import load_payload
from noetlc.ir.dis import disassemble


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="FILE.nbc or FILE.yaml")


def run(args: argparse.Namespace) -> int:
    payload = load_payload(args.file)
    if payload is None:
        return 1
    try:
        text = disassemble(payload)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        print(
            f"{args.file}:1:1: error[NOE702]: the bytecode is malformed ({type(exc).__name__}: {exc})",
            file=sys.stderr,
        )
        return 1
    sys.stdout.write(text)
    return 0
