"""The `noetlc` command line.

Exit codes: 0 success, 1 the input has errors, 2 usage errors (bad arguments), 70 an internal
error (a bug in noetlc, printed with a please-report footer). No input produces a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module

from noetlc import __version__
from noetlc.diagnostics.errors import InternalCompilerError, UserError
from noetlc.diagnostics.report import REPORT_FOOTER

EXIT_OK = 0
EXIT_ERRORS = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 70

# (command, module under noetlc.cli.noetlc_commands, one-line help) — a literal table.
COMMANDS: list[tuple[str, str, str]] = [
    ("check", "check", "validate playbooks and print diagnostics"),
    ("lint", "lint", "static analysis: soundness, reachability, dead arcs (CI-ready)"),
    ("explain", "explain", "print the long explanation of a diagnostic code"),
    ("schema", "schema", "print the JSON Schema of playbooks (for editors)"),
    ("expr", "expr", "evaluate one expression against JSON variables"),
    ("migrate", "migrate", "print or rewrite a playbook in canonical form"),
    ("compile", "compile", "compile a playbook to bytecode (.nbc); dump any pass"),
    ("dis", "dis", "disassemble bytecode with YAML line numbers"),
    ("graph", "graph", "draw the steps or the Petri net (DOT, Mermaid)"),
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error[NOE800]: {message}\n")
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="noetlc", description="The NoETL playbook compiler.")
    parser.add_argument("--version", action="version", version=f"noetlc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module, help_text in COMMANDS:
        mod = import_module(f"noetlc.cli.noetlc_commands.{module}")
        p = sub.add_parser(name, help=help_text, description=(mod.__doc__ or help_text).strip())
        mod.add_arguments(p)
        p.set_defaults(_module=mod)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help / --version (0) or usage errors (2)
        return int(exc.code or 0)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return run_guarded(lambda: int(args._module.run(args)))


def run_guarded(fn: object) -> int:
    """Run a command; a problem the user can fix prints `error[CODE]` and its hint (exit 1),
    our own bugs a clean report instead of a traceback."""
    try:
        return fn()  # type: ignore[operator,no-any-return]
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except UserError as exc:
        sys.stderr.write(exc.render() + "\n")
        return EXIT_ERRORS
    except InternalCompilerError as exc:
        where = f" in pass '{exc.pass_name}'" if exc.pass_name else ""
        sys.stderr.write(f"internal error[NOE900]{where}: {exc}\n{REPORT_FOOTER}\n")
        return EXIT_INTERNAL
    except Exception as exc:
        sys.stderr.write(f"internal error[NOE900]: {type(exc).__name__}: {exc}\n{REPORT_FOOTER}\n")
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
