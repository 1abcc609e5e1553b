"""A command line builds only the parser of the command it runs (`common.build_parser` given
argv), and that parser parses and prints exactly what the full one does."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from typing import Any

import pytest

from noetlc.cli import noetlc_main, vm_main

HELLO = "examples/hello.yaml"
CASES = [
    (vm_main, ["run", HELLO, "--db", "memory:", "--quiet"]),
    (vm_main, ["run"]),  # a missing argument
    (vm_main, ["run", HELLO, "--no-such-option"]),
    (vm_main, ["status", "--help"]),
    (vm_main, ["db", "--help"]),
    (vm_main, ["nope"]),  # an unknown command: every parser, the error lists them
    (vm_main, ["--version"]),
    (vm_main, []),
    (noetlc_main, ["check", HELLO, "--format", "json"]),
    (noetlc_main, ["check", "--help"]),
    (noetlc_main, ["explain", "NOE101", "extra"]),
    (noetlc_main, ["-h"]),
    (noetlc_main, ["--version", "check"]),
    (noetlc_main, ["--version", "--nope"]),
]


def parsed(build: Any, argv: Sequence[str]) -> tuple[Any, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            args = vars(build.parse_args(argv))
            args.pop("_module", None)
            result: Any = args
        except SystemExit as exc:
            result = exc.code
    return result, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("main, argv", CASES, ids=[" ".join(a) or "-" for _, a in CASES])
def test_the_one_command_parser_behaves_as_the_full_one(main: Any, argv: list[str]) -> None:
    full = parsed(main.build_parser(), argv)
    assert parsed(main.build_parser(argv), argv) == full


def test_only_the_named_command_gets_a_parser() -> None:
    def commands(parser: Any) -> list[str]:
        return sorted(next(a for a in parser._actions if a.dest == "command").choices)

    assert commands(vm_main.build_parser(["run", HELLO])) == ["run"]
    assert len(commands(vm_main.build_parser(["nope"]))) == len(vm_main.COMMANDS)
    assert len(commands(vm_main.build_parser(["--help", "run"]))) == len(vm_main.COMMANDS)
    assert len(commands(noetlc_main.build_parser())) == len(noetlc_main.COMMANDS)
    assert commands(noetlc_main.build_parser(["--version"])) == []
