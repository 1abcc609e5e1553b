"""`noetlc` command line: formats, exit codes, and no tracebacks on any input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from noetlc.cli import noetlc_main as cli
from noetlc.compiler.pipeline import PIPELINE
from noetlc.diagnostics.errors import InternalCompilerError

GOOD = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: good}
workflow:
  - step: start
    tool: {kind: noop}
"""
BAD = GOOD + "    nxt: end\n"


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_check_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", _write(tmp_path, "good.yaml", GOOD)]) == 0
    assert cli.main(["check", _write(tmp_path, "bad.yaml", BAD)]) == 1
    out = capsys.readouterr().out
    assert "bad.yaml:7:5: error[NOE101]: unknown key `nxt`" in out
    assert "    nxt: end" in out and "^^^" in out  # source line and caret


def test_check_json_is_one_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [_write(tmp_path, "good.yaml", GOOD), _write(tmp_path, "bad.yaml", BAD)]
    assert cli.main(["check", "--format", "json", *files]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["files"] == 2
    [diag] = payload["diagnostics"]
    assert set(diag) == {
        "code", "severity", "message", "file", "line", "column", "end_line", "end_column", "hint",
    }  # fmt: skip
    assert (diag["code"], diag["line"], diag["column"], diag["end_column"]) == ("NOE101", 7, 5, 8)
    assert diag["hint"] == "did you mean `next`?"


def test_check_sarif(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", "--format", "sarif", _write(tmp_path, "bad.yaml", BAD)]) == 1
    sarif = json.loads(capsys.readouterr().out)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    assert run["tool"]["driver"]["rules"][0]["id"] == "NOE101"
    region = run["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (7, 5)


def test_directories_expand_to_yaml_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, "a.yaml", GOOD)
    _write(tmp_path, "b.yml", GOOD)
    _write(tmp_path, "a.expect.yaml", "status: completed\n")
    assert cli.main(["check", "--format", "json", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == 2


def test_unreadable_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe\x00garbage")
    code = cli.main(
        ["check", "--format", "json", str(tmp_path / "missing.yaml"), str(tmp_path / "binary.yaml")]
    )
    assert code == 1
    codes = [d["code"] for d in json.loads(capsys.readouterr().out)["diagnostics"]]
    assert codes == ["NOE004", "NOE004"]


@pytest.mark.parametrize(
    "argv",
    [["check"], ["check", "--format", "xml", "x.yaml"], ["frobnicate"], ["--nope"], []],
)
def test_usage_errors_exit_2_without_traceback(argv: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "noetlc.cli.noetlc_main", *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    if argv:
        assert "error[NOE800]" in proc.stderr


def test_explain(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explain", "NOE101"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("NOE101 (error): unknown key") and "Example" in out
    assert cli.main(["explain", "101"]) == 0
    assert cli.main(["explain"]) == 0
    assert "NOE201" in capsys.readouterr().out


def test_explain_unknown_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explain", "NOE12345"]) == 2
    assert "error[NOE801]" in capsys.readouterr().err


def test_internal_errors_have_a_report_footer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import noetlc.compiler.passes.resolve as resolve

    def broken(unit: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(resolve, "run", broken)
    assert cli.main(["check", _write(tmp_path, "good.yaml", GOOD)]) == cli.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "internal error[NOE900] in pass 'resolve'" in err and "bug in noetlc" in err
    assert any(p.name == "resolve" for p in PIPELINE)


def test_internal_error_type_is_distinct_from_user_errors() -> None:
    assert not issubclass(InternalCompilerError, (ValueError, KeyError))


def test_schema_is_valid_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "NoETL playbook"
    assert "workflow" in schema["required"]
    assert "Step" in schema["$defs"]


def test_module_entry_points() -> None:
    for module in ("noetlc.cli.noetlc_main", "noetlc.cli.vm_main"):
        proc = subprocess.run(
            [sys.executable, "-m", module, "--version"], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0 and proc.stdout.startswith(("noetlc", "noetl-vm"))
