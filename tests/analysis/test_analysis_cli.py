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
    [diag] = [d for d in data["diagnostics"] if d["code"] == "NOE504"]
    assert diag["line"] == 24 and diag["column"] == 11
    steps = [(t["step"], t["transition"], t["line"]) for t in diag["trace"]]
    # b reaches the join twice (its loop fires with the arc to the join), a once
    assert steps.count(("b", "b->join#0", 22)) == 2 and ("a", "a->join#0", 16) in steps
    assert {s["file"] for s in data["soundness"]} == {DEADLOCK, CLEAN}


def test_sarif_carries_rules_and_code_flows(capsys: pytest.CaptureFixture[str]) -> None:
    cli.main(["lint", DEADLOCK, "--format", "sarif"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    assert "NOE504" in [r["id"] for r in run["tool"]["driver"]["rules"]]
    [result] = [r for r in run["results"] if r["ruleId"] == "NOE504"]
    flow = result["codeFlows"][0]["threadFlows"][0]["locations"]
    lines = [loc["location"]["physicalLocation"]["region"]["startLine"] for loc in flow]
    assert 16 in lines and 22 in lines


def test_exit_status_follows_the_severity(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["lint", WARNING_ONLY]) == 0
    assert cli.main(["lint", WARNING_ONLY, "--severity", "warning"]) == 1
    assert cli.main(["lint", CLEAN, "--severity", "warning"]) == 0
    err = capsys.readouterr().err
    assert "1 file(s) linted" in err and "state(s) explored" in err


def test_budget_stops_the_search_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    # the loop through the fork is left to the search; one state is not enough to reach the
    # deadlock, so the verdict is partial and says so (never a silent "sound")
    assert cli.main(["lint", DEADLOCK, "--budget-states", "1", "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)["diagnostics"]
    [budget] = [d for d in found if d["code"] == "NOE509"]
    assert budget["severity"] == "warning"
    assert not {"NOE504", "NOE511"} & {d["code"] for d in found}


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


def test_baseline_reports_only_new_findings(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    baseline = tmp_path / "baseline.json"
    assert cli.main(["lint", DEADLOCK, "--format", "json"]) == 1
    baseline.write_text(capsys.readouterr().out)
    # the known deadlock is excused; a new finding in another file is not
    assert cli.main(["lint", DEADLOCK, "--baseline", str(baseline), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["diagnostics"] == []
    assert cli.main(["lint", DEADLOCK, WARNING_ONLY, "--baseline", str(baseline)]) == 0
    out = capsys.readouterr().out
    assert "NOE501" in out and "NOE504" not in out


@pytest.mark.parametrize("content", [None, "{}", "not json"])
def test_bad_baseline_is_a_usage_error(
    content: str | None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    baseline = tmp_path / "baseline.json"
    if content is not None:
        baseline.write_text(content)
    assert cli.main(["lint", CLEAN, "--baseline", str(baseline)]) == 2
    err = capsys.readouterr().err
    assert "NOE800" in err and "hint:" in err


def test_graph_exports_pnml_and_promela(capsys: pytest.CaptureFixture[str]) -> None:
    from xml.dom.minidom import parseString

    assert cli.main(["graph", DEADLOCK, "--format", "pnml"]) == 0
    doc = parseString(capsys.readouterr().out)
    names = {n.firstChild.data for n in doc.getElementsByTagName("text")}
    assert {"start.entry", "join.from.a", "join.from.b", "b->join#0"} <= names
    [marked] = doc.getElementsByTagName("initialMarking")
    assert marked.parentNode.getElementsByTagName("text")[0].firstChild.data == "start.entry"
    assert cli.main(["graph", DEADLOCK, "--format", "promela"]) == 0
    pml = capsys.readouterr().out
    assert "active proctype net()" in pml and "/* deadlock at join join */" in pml
    assert 'printf("ran b\\n")' in pml
