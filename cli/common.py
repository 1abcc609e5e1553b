"""What both command lines share: exit codes, the argument parser, the guarded run.

A command line is a literal table of subcommands, `(command, module, one-line help)`, each
module with `add_arguments(parser)` and `run(args) -> int`. Argument errors print NOE800 and
exit 2. A command that cannot go on raises a `UserError` (or one of the classes below);
`run_guarded` is the one place that prints it as `error[CODE]: message` and its hint and picks
the exit code from its kind (`exit_code_for`: diagnostics/errors.py's `OUTCOMES`, the table the
service's HTTP statuses come from too); our own bugs become NOE900 with the please-report
footer (exit 70): no input produces a traceback.

`EXIT_CODES` is the table of exit codes of both command lines; docs/cli.md shows it and a test
keeps the two equal.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import import_module
from types import ModuleType
from typing import Any

from noetlc.diagnostics.errors import (
    OUTCOMES,
    REPORT_FOOTER,
    ErrorKind,
    InternalCompilerError,
    UserError,
)
from noetlc.diagnostics.extras import missing_extra

EXIT_OK = 0
EXIT_ERRORS = OUTCOMES[ErrorKind.INPUT].exit_code
EXIT_USAGE = OUTCOMES[ErrorKind.USAGE].exit_code
EXIT_CANCELLED = 3
EXIT_EXECUTION = OUTCOMES[ErrorKind.EXECUTION].exit_code
EXIT_UNAVAILABLE = OUTCOMES[ErrorKind.UNAVAILABLE].exit_code
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130

# (code, meaning): every exit code of `noetlc` and `noetl-vm`
EXIT_CODES: list[tuple[int, str]] = [
    (EXIT_OK, "success; for run, resume and submit --wait: the execution completed"),
    (
        EXIT_ERRORS,
        "the input has errors (diagnostics), a lint finding at --severity, the execution"
        " failed, a replay diverged or found a log invariant broken, or the database schema is not"
        " current",
    ),
    (
        EXIT_USAGE,
        "usage: a bad option or value, a file named by an option that cannot be read (--workload,"
        " --keychain), no playbook found, an output that cannot be written, or a command whose"
        " extra is not installed (NOE820)",
    ),
    (EXIT_CANCELLED, "the execution was cancelled"),
    (
        EXIT_EXECUTION,
        "the execution named cannot take the request: no such id (or an ambiguous prefix),"
        " it already ended, or a live process owns it",
    ),
    (
        EXIT_UNAVAILABLE,
        "the event store or database cannot be used: missing, unreachable, refused, a bad URL,"
        " or a schema that is not upgraded",
    ),
    (EXIT_INTERNAL, "an internal error: a bug in noetlc, printed with a please-report footer"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
]


@contextmanager
def loading() -> Iterator[None]:
    """Pause the cyclic garbage collector while a command loads what it runs: imports,
    compiling or decoding the program, opening the store. Loading allocates hundreds of
    thousands of objects that live until the process ends (modules, classes, functions, the
    program); the young collections on the way found nothing to free and cost about 3 % of a
    small `run`. Reference counting frees as usual meanwhile. At the end, `freeze` then
    `unfreeze` moves everything to the oldest generation without scanning it (as
    `compiler.pipeline.gc_paused` does), so the first young collection of the execution does
    not scan it all at once; nothing stays exempt from later full collections."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if was_enabled:
            gc.enable()


class UsageError(UserError):
    """The command line is wrong: a bad value, an unreadable option file, an unwritable output
    (exit 2)."""

    kind = ErrorKind.USAGE


class ExecutionStateError(UserError):
    """The execution named cannot take the request: unknown, ended, or owned (exit 4)."""

    kind = ErrorKind.EXECUTION


class UnavailableError(UserError):
    """The event store or database cannot be used (exit 5)."""

    kind = ErrorKind.UNAVAILABLE


def exit_code_for(exc: UserError) -> int:
    """The exit code of a problem the user can fix: its kind's (diagnostics/errors.py)."""
    return exc.outcome.exit_code


Commands = list[tuple[str, str, str]]


class UsageParser(argparse.ArgumentParser):
    """An argument parser whose usage errors carry a stable code."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error[NOE800]: {message}\n")
        sys.exit(EXIT_USAGE)


def build_parser(
    prog: str,
    description: str,
    version: str,
    package: str,
    commands: Commands,
    argv: Sequence[str] | None = None,
) -> argparse.ArgumentParser:
    """The parser of a command line whose subcommands are the modules `package.<module>`.

    A subcommand's module is imported only when that subcommand is parsed (`LazyCommandParser`):
    `--version`, `--help` and one command never import the other commands' modules. Given the
    `argv` it will parse, when its first word is a command, only that command gets a parser:
    each parser costs a cold start argparse's set-up and message look-ups, and what that
    command line prints (its help, its errors, the top usage naming `COMMAND`) is the same.
    `--version` first gets none; anything else (no argv, another option or an unknown word
    first) gets every command's."""
    parser = UsageParser(prog=prog, description=description)
    parser.add_argument("--version", action="version", version=f"{prog} {version}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=LazyCommandParser)
    chosen = [c for c in commands if argv and c[0] == argv[0]] or commands
    if argv and argv[0] == "--version":  # it prints and exits before a command is looked at
        chosen = []
    for name, module, help_text in chosen:
        sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            module=f"{package}.{module}",
            formatter_class=argparse.RawDescriptionHelpFormatter,  # examples keep their lines
        )
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

    def add_subparsers(self, **kwargs: Any) -> Any:
        # a command's own subcommands (`db status`) are plain parsers, not lazy ones
        kwargs.setdefault("parser_class", UsageParser)
        return super().add_subparsers(**kwargs)

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
    except ImportError as exc:  # a command's module needs an extra that is not installed
        problem = missing_extra(exc)
        if problem is None:
            raise
        sys.stderr.write(problem.render() + "\n")
        return EXIT_USAGE
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    run: Callable[[argparse.Namespace], int] = args._module.run
    return run_guarded(lambda: int(run(args)))


def run_guarded(fn: Callable[[], int]) -> int:
    """Run a command; a problem the user can fix prints `error[CODE]` and its hint (exit code
    by its kind, `exit_code_for`), our own bugs a clean report instead of a traceback."""
    try:
        return fn()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except UserError as exc:
        sys.stderr.write(exc.render() + "\n")
        return exit_code_for(exc)
    except ImportError as exc:
        problem = missing_extra(exc)
        if problem is None:
            sys.stderr.write(
                f"internal error[NOE900]: {type(exc).__name__}: {exc}\n{REPORT_FOOTER}\n"
            )
            return EXIT_INTERNAL
        sys.stderr.write(problem.render() + "\n")
        return EXIT_USAGE
    except InternalCompilerError as exc:
        where = f" in pass '{exc.pass_name}'" if exc.pass_name else ""
        sys.stderr.write(f"internal error[NOE900]{where}: {exc}\n{REPORT_FOOTER}\n")
        return EXIT_INTERNAL
    except Exception as exc:
        if type(exc).__module__ == "sqlite3":  # a store the user can fix (NOE814)?
            from noetlc.runtime.event_store import store_error_of

            unwritable = store_error_of(exc)
            if unwritable is not None:
                sys.stderr.write(unwritable.render() + "\n")
                return exit_code_for(unwritable)
        sys.stderr.write(f"internal error[NOE900]: {type(exc).__name__}: {exc}\n{REPORT_FOOTER}\n")
        return EXIT_INTERNAL
