"""`noetlc lint`: formats (JSON like `check`, with traces; SARIF with codeFlows), exit codes by
severity, the state budget, usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from noetlc.cli import noetlc_main as cli

CASES = Path(__file__).parent.parent / "diagnostics" / "cases"
DEADLOCK = str(CASES / "NOE504_join_deadlock.yaml")
WARNING_ONLY = str(CASES / "NOE501_unreachable_step.yaml")
CLEAN = str(Path(__file__).parent / "passing" / "NOE504_join_deadlock.yaml")


def test_json_is_checks_object_with_traces(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["lint", DEADLOCK, CLEAN, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["files"] == 2 and isinstance(data["states"], int)
    [diag] = data["diagnostics"]
    assert diag["code"] == "NOE504" and diag["line"] == 19 and diag["column"] == 11
    steps = [(t["step"], t["transition"], t["line"]) for t in diag["trace"]]
    assert ("start", "start->b#1", 12) in steps and ("b", "b->join#0", 18) in steps
    assert {s["file"] for s in data["soundness"]} == {DEADLOCK, CLEAN}


def test_sarif_carries_rules_and_code_flows(capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["lint", DEADLOCK, "--format", "sarif"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["NOE504"]
    [result] = run["results"]
    flow = result["codeFlows"][0]["threadFlows"][0]["locations"]
    lines = [loc["location"]["physicalLocation"]["region"]["startLine"] for loc in flow]
    assert 12 in lines and 18 in lines


def test_exit_status_follows_the_severity(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["lint", WARNING_ONLY]) == 0
    assert cli.main(["lint", WARNING_ONLY, "--severity", "warning"]) == 1
    assert cli.main(["lint", CLEAN, "--severity", "warning"]) == 0
    err = capsys.readouterr().err
    assert "1 file(s) linted" in err and "state(s) explored" in err


def test_budget_stops_the_search_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    # the reduction leaves the exclusive split and its AND-join to the search; one state is
    # not enough to reach the deadlock, so the verdict is partial and says so
    assert cli.main(["lint", DEADLOCK, "--budget-states", "1", "--format", "json"]) == 0
    codes = [d["code"] for d in json.loads(capsys.readouterr().out)["diagnostics"]]
    assert codes == ["NOE509"]


@pytest.mark.parametrize("budget", ["0", "many"])
def test_bad_budget_is_a_usage_error(budget: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["lint", CLEAN, "--budget-states", budget]) == 2
    assert "NOE800" in capsys.readouterr().err


def test_broken_playbook_reports_the_front_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("workflow: [\n", encoding="utf-8")
    assert cli.main(["lint", str(path)]) == 1
    assert "NOE001" in capsys.readouterr().out
