"""`noetlc expr`: evaluate one expression from the command line."""

from __future__ import annotations

import json

import pytest

from noetlc.cli import noetlc_main as cli


def test_evaluates_with_variables(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        cli.main(["expr", "{{ ctx.count | default(0) + 1 }}", "--vars", '{"ctx": {"count": 2}}'])
        == 0
    )
    assert json.loads(capsys.readouterr().out) == 3


def test_guard_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        cli.main(["expr", "--guard", "event.name == 'x'", "--vars", '{"event": {"name": "x"}}'])
        == 0
    )
    assert capsys.readouterr().out.strip() == "true"


def test_syntax_errors_are_located(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["expr", "{{ x + }}"]) == 1
    assert "error[NOE301]" in capsys.readouterr().err


def test_runtime_errors_are_located(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["expr", "{{ ctx.count + 1 }}", "--vars", '{"ctx": {}}']) == 1
    err = capsys.readouterr().err
    assert err.startswith("<expr>:1:1: error[NOE310]: UndefinedError")


def test_bad_vars_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["expr", "{{ x }}", "--vars", "{nope"]) == 2
    assert "NOE800" in capsys.readouterr().err


def test_undefined_prints_null(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["expr", "{{ missing }}"]) == 0
    assert capsys.readouterr().out.strip() == "null"
