"""The `noetlc` command line.

Exit codes (the table both command lines share is `EXIT_CODES` in common.py): 0 success, 1
the input has errors, 2 usage errors, 70 an internal error (a bug in noetlc, printed with a
please-report footer). No input produces a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from noetlc import __version__
from noetlc.cli.common import EXIT_INTERNAL, Commands, run_command
from noetlc.cli.common import build_parser as build_parser_of

__all__ = ["COMMANDS", "EXIT_INTERNAL", "build_parser", "main"]

# (command, module under noetlc.cli.noetlc_commands, one-line help) — a literal table.
COMMANDS: Commands = [
    ("check", "check", "validate playbooks and print diagnostics"),
    ("lint", "lint", "static analysis: soundness, reachability, dead arcs (CI-ready)"),
    ("explain", "explain", "print the long explanation of a diagnostic code"),
    ("schema", "schema", "print the JSON Schema of playbooks (for editors)"),
    ("expr", "expr", "evaluate one expression against JSON variables"),
    ("migrate", "migrate", "print or rewrite a playbook in canonical form"),
    ("compile", "compile", "compile a playbook to bytecode (.nbc); dump any pass"),
    ("dis", "dis", "disassemble bytecode with YAML line numbers"),
    ("graph", "graph", "draw the steps or the Petri net (DOT, Mermaid)"),
    ("completion", "completion", "print a shell completion script (bash, zsh, fish)"),
]


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser; given the `argv` it will parse, only its command's
    (`common.build_parser`)."""
    return build_parser_of(
        "noetlc",
        "The NoETL playbook compiler.",
        __version__,
        "noetlc.cli.noetlc_commands",
        COMMANDS,
        argv,
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_command(build_parser(argv), argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
