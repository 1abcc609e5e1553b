"""What `noetlc check` and `noetlc expr` print: notes counted apart from warnings, a file
that is not UTF-8 located at its first bad byte, a YAML syntax error naming where the
unclosed bracket began, a control character at its position, `expr '1 + 2'` is 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from noetlc.cli import noetlc_main

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "tests" / "diagnostics" / "cases"


def _check(capsys: pytest.CaptureFixture[str], *files: Path) -> tuple[int, str, str]:
    code = noetlc_main.main(["check", "--no-cache", *map(str, files)])
    out, err = capsys.readouterr()
    return code, out, err


def test_notes_are_counted_apart_from_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _check(capsys, CASES / "NOE303_slow_path.yaml")
    assert code == 0
    assert out.count("note[") == 1 and "warning[" not in out
    assert err.strip().endswith("1 file(s) checked: 0 error(s), 0 warning(s), 1 note(s)")


def test_a_file_that_is_not_utf8_is_located_at_the_bad_byte(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(
        b"apiVersion: noetl.io/v2\nkind: Playbook\nworkflow:\n"
        b'  - step: start\n    desc: "caf\xe9"\n'
    )
    code, out, _ = _check(capsys, path)
    assert code == 1
    assert f"{path}:5:15: error[NOE004]" in out and "byte 0xe9" in out
    assert "iconv" in out  # the hint says how to fix it


def test_a_syntax_error_names_the_unclosed_bracket(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "bracket.yaml"
    path.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nworkflow:\n  - step: start\n"
        '    tool: {kind: python, input: [1, 2,\n    code: "result = 1"}\n',
        encoding="utf-8",
    )
    noetlc_main.main(["check", "--no-cache", "--format", "json", str(path)])
    [diag] = json.loads(capsys.readouterr().out)["diagnostics"]
    assert diag["code"] == "NOE001" and diag["line"] == 6
    # the `[` of `input: [1, 2,` is at line 5, column 33
    assert "flow sequence that starts at line 5, column 33" in diag["message"]


def test_a_control_character_is_located(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "ctl.yaml"
    path.write_text("apiVersion: noetl.io/v2\nkind: Play\x07book\n", encoding="utf-8")
    code, out, _ = _check(capsys, path)
    assert code == 1 and f"{path}:2:11: error[NOE001]" in out and "U+0007" in out


@pytest.mark.parametrize(
    ("argument", "printed"),
    [("1 + 2", "3"), ("'a' ~ 'b'", '"ab"'), ("n={{ 1 + 2 }}", '"n=3"'), ("{{ [1, 2] }}", "[1, 2]")],
)
def test_expr_evaluates_a_bare_expression(
    capsys: pytest.CaptureFixture[str], argument: str, printed: str
) -> None:
    assert noetlc_main.main(["expr", argument]) == 0
    assert capsys.readouterr().out.strip() == printed


def test_three_typos_in_independent_passes_are_one_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _check(capsys, REPO / "tests" / "fixtures" / "readme" / "typos.yaml")
    assert code == 1
    assert [
        line.split("[")[1].split("]")[0]
        for line in out.splitlines()
        if "error[" in line or "warning[" in line
    ] == ["NOE205", "NOE202", "NOE305"]
