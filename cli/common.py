"""What both command lines share: exit codes, the argument parser, the guarded run.

A command line is a literal table of subcommands, `(command, module, one-line help)`, each
module with `add_arguments(parser)` and `run(args) -> int`. Usage errors print NOE800 and exit
2; `run_guarded` is the one place that turns a `UserError` into `error[CODE]: message`, its hint
and exit 1, and our own bugs into NOE900 with the please-report footer (exit 70): no input
produces a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from types import ModuleType
from typing import Any

EXIT_OK = 0
EXIT_ERRORS = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 70

Commands = list[tuple[str, str, str]]


class UsageParser(argparse.ArgumentParser):
    """An argument parser whose usage errors carry a stable code."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error[NOE800]: {message}\n")
        sys.exit(EXIT_USAGE)


def build_parser(
    prog: str, description: str, version: str, package: str, commands: Commands
) -> argparse.ArgumentParser:
    """The parser of a command line whose subcommands are the modules `package.<module>`.

    A subcommand's module is imported only when that subcommand is parsed (`LazyCommandParser`):
    `--version`, `--help` and one command never import the other commands' modules."""
    parser = UsageParser(prog=prog, description=description)
    parser.add_argument("--version", action="version", version=f"{prog} {version}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=LazyCommandParser)
    for name, module, help_text in commands:
        sub.add_parser(name, help=help_text, description=help_text, module=f"{package}.{module}")
    return parser


class LazyCommandParser(UsageParser):
    """A subcommand's parser that imports its module (its arguments, its description and its
    `run`) the first time it parses or prints help."""

    def __init__(self, *args: Any, module: str | None = None, **kwargs: Any) -> None:
        # `module` is None for the nested parsers a command adds itself (`db upgrade`):
        # argparse makes them of the parent's class
        super().__init__(*args, **kwargs)
        self.command_module = module
        self._loaded: ModuleType | None = None

    def load(self) -> None:
        if self._loaded is None and self.command_module is not None:
            mod = self._loaded = import_module(self.command_module)
            if mod.__doc__:
                self.description = mod.__doc__.strip()
            mod.add_arguments(self)
            self.set_defaults(_module=mod)

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        self.load()
        return super().parse_known_args(*args, **kwargs)

    def format_help(self) -> str:
        self.load()
        return super().format_help()

    def format_usage(self) -> str:
        self.load()
        return super().format_usage()


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    """Parse `argv` and run the chosen subcommand under `run_guarded`."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help / --version (0) or usage errors (2)
        return int(exc.code or 0)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    run: Callable[[argparse.Namespace], int] = args._module.run
    return run_guarded(lambda: int(run(args)))


def run_guarded(fn: Callable[[], int]) -> int:
    """Run a command; a problem the user can fix prints `error[CODE]` and its hint (exit 1),
    our own bugs a clean report instead of a traceback."""
    from noetlc.diagnostics.errors import InternalCompilerError, UserError
    from noetlc.diagnostics.report import REPORT_FOOTER

    try:
        return fn()
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
