"""Disassemble a playbook's bytecode: the control program's transition records and the
pipeline instructions, each with the YAML line it came from.

Takes a `.nbc` file or a `.yaml` playbook (compiled on the fly). Jump targets are marked
`>>`; expressions are shown with their source; join kinds are listed first.
"""

from __future__ import annotations

import argparse

from noetlc.cli.noetlc_commands.artifacts import render_program
from noetlc.ir.dis import disassemble


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="FILE.nbc or FILE.yaml")


def run(args: argparse.Namespace) -> int:
    return render_program(args.file, disassemble)
