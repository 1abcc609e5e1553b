"""Every conformance case runs embedded and matches its expectation file (README of
tests/fixtures/conformance: status, runs, results by subset, ctx by subset, not_run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from noetlc.cli import vm_main as cli
from tests.conftest import CONFORMANCE_CASES

CASES = CONFORMANCE_CASES


def _subset(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and _subset(v, actual[k]) for k, v in expected.items()
        )
    return bool(expected == actual)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_conformance_case(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expect = (
        yaml.safe_load(case.with_name(case.stem + ".expect.yaml").read_text(encoding="utf-8")) or {}
    )
    argv = ["run", str(case), "--json", "--db", "memory:"]
    for key, value in (expect.get("set") or {}).items():
        argv += ["--set", f"{key}={json.dumps(value)}"]
    code = cli.main(argv)
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    if "status" in expect:
        assert summary["status"] == expect["status"], summary
        assert code == (0 if expect["status"] == "completed" else 1)
    steps = summary["steps"]
    for step, runs in (expect.get("runs") or {}).items():
        if runs == 0:
            assert (
                step not in steps or steps[step]["runs"] == 0 or steps[step]["status"] == "skipped"
            )
        else:
            assert steps[step]["runs"] == runs, (step, steps.get(step))
    for step, value in (expect.get("results") or {}).items():
        assert _subset(value, steps[step]["result"]), (step, steps[step]["result"])
    assert _subset(expect.get("ctx") or {}, summary["ctx"]), summary["ctx"]
    for step in expect.get("not_run") or []:
        assert step not in steps or steps[step]["status"] != "done"
    assert summary["events"] > 0


def test_run_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli.main(["run", str(CASES[0]), "--set", "novalue"]) == 2
    assert "NOE800" in capsys.readouterr().err
    assert cli.main(["run", str(tmp_path / "missing.nbc")]) == 1
