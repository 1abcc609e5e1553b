"""The `noetl-vm` command line: runs compiled playbooks.

Exit codes (the table both command lines share is `EXIT_CODES` in common.py): 0 completed,
1 failed, 2 usage, 3 cancelled, 4 the execution named cannot take the request, 5 the store or
database cannot be used, 70 internal error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from noetlc import __version__
from noetlc.cli.common import Commands, run_command
from noetlc.cli.common import build_parser as build_parser_of

# (command, module under noetlc.cli.vm_commands, one-line help) — a literal table.
COMMANDS: Commands = [
    ("run", "run", "run a playbook embedded (one process)"),
    ("status", "status", "list executions, or show one"),
    ("events", "events", "print an execution's events (--follow to wait for more)"),
    ("replay", "replay", "check that a log replays to the same events and keeps its invariants"),
    ("resume", "resume", "finish an execution whose process died"),
    ("cancel", "cancel", "cancel a running execution"),
    ("signal", "signal", "deliver a signal to an execution's listener steps"),
    ("db", "db", "create or upgrade the PostgreSQL schema of distributed mode"),
    ("server", "server", "distributed mode: run control VMs (PostgreSQL)"),
    ("worker", "worker", "distributed mode: run tasks (PostgreSQL)"),
    ("submit", "submit", "distributed mode: start an execution on a running cluster"),
    ("serve", "serve", "the HTTP API, playbook catalog, credentials and web console"),
    ("catalog", "catalog", "register, list and show playbooks in the catalog"),
    ("completion", "completion", "print a shell completion script (bash, zsh, fish)"),
]


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser; given the `argv` it will parse, only its command's
    (`common.build_parser`)."""
    return build_parser_of(
        "noetl-vm", "Run NoETL playbooks.", __version__, "noetlc.cli.vm_commands", COMMANDS, argv
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_command(build_parser(argv), argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
