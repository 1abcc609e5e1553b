"""The `noetl-vm` command line: runs compiled playbooks.

Exit codes: 0 completed, 1 failed, 2 usage, 3 cancelled, 70 internal error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from noetlc import __version__

EXIT_USAGE = 2
EXIT_INTERNAL = 70

# (command, module under noetlc.cli.vm_commands, one-line help) — a literal table.
COMMANDS: list[tuple[str, str, str]] = [
    ("run", "run", "run a playbook embedded (one process)"),
    ("status", "status", "list executions, or show one"),
    ("events", "events", "print an execution's events (--follow to wait for more)"),
    ("replay", "replay", "check that an execution's log replays to the same events"),
    ("resume", "resume", "finish an execution whose process died"),
    ("cancel", "cancel", "cancel a running execution"),
    ("signal", "signal", "deliver a signal to an execution's listener steps"),
    ("db", "db", "create or upgrade the PostgreSQL schema of distributed mode"),
    ("server", "server", "distributed mode: run control VMs (PostgreSQL)"),
    ("worker", "worker", "distributed mode: run tasks (PostgreSQL)"),
    ("submit", "submit", "distributed mode: start an execution on a running cluster"),
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error[NOE800]: {message}\n")
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="noetl-vm", description="Run NoETL playbooks.")
    parser.add_argument("--version", action="version", version=f"noetl-vm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module, help_text in COMMANDS:
        mod = import_module(f"noetlc.cli.vm_commands.{module}")
        p = sub.add_parser(name, help=help_text, description=(mod.__doc__ or help_text).strip())
        mod.add_arguments(p)
        p.set_defaults(_module=mod)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from noetlc.cli.noetlc_main import run_guarded

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    run: Callable[[argparse.Namespace], int] = args._module.run
    return run_guarded(lambda: int(run(args)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
