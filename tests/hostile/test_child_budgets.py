"""Budgets across child executions (embedded): a playbook that calls itself stops at the
depth budget, a fan-out of fan-outs at the executions budget; the calling step fails with
NOE858, every execution ends (none left `running`), and the concurrent children of a fan-out
never lose a write to SQLite's lock ("database is locked")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import vm_main
from noetlc.runtime.event_store import SQLiteStore
from noetlc.runtime.logcheck import violations

ITSELF = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: itself}
workflow:
  - step: start
    tool: {kind: playbook, path: itself.yaml, wait: true}
"""

FAN = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fan}
workload: {width: 10, level: 0, depth: 3}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      arcs:
        - {step: each, when: "{{ workload.level < workload.depth }}"}
        - {step: end, when: "{{ workload.level >= workload.depth }}"}
  - step: each
    loop:
      in: "{{ range(workload.width) | list }}"
      iterator: x
      spec: {mode: parallel, max_in_flight: 100}
    tool:
      kind: playbook
      path: fan.yaml
      args: {width: "{{ workload.width }}", level: "{{ workload.level + 1 }}", depth: "{{ workload.depth }}"}
      wait: true
    next: {arcs: [{step: end}]}
  - step: end
    tool: {kind: noop}
"""


def _run(tmp_path: Path, name: str, text: str, *options: str) -> tuple[int, SQLiteStore]:
    (tmp_path / name).write_text(text)
    db = tmp_path / "noetl.db"
    code = vm_main.main(
        ["run", str(tmp_path / name), "--quiet", "--json", "--db", f"sqlite:///{db}", *options]
    )
    return code, SQLiteStore(str(db))


def _budget_failures(store: SQLiteStore) -> list[dict[str, Any]]:
    """The errors of the calling steps that a budget across children failed."""
    out = []
    for record in store.executions():
        for event in store.read(record["execution_id"]):
            error = (event["payload"] or {}).get("error") or {}
            if event["name"] in ("step.failed", "loop.iteration.failed") and (
                error.get("code") == "NOE858"
            ):
                out.append(error)
    return out


@pytest.mark.parametrize("depth", [None, 5])
def test_a_playbook_that_calls_itself_stops_at_the_depth_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int | None
) -> None:
    options = () if depth is None else ("--budget", f"child_depth={depth}")
    code, store = _run(tmp_path, "itself.yaml", ITSELF, *options)
    limit = depth or 32
    assert code == 1
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["status"] == "failed"
    records = store.executions()
    assert len(records) == limit + 1  # the root and `limit` levels of children
    assert {r["status"] for r in records} == {"failed"}  # nothing left running
    [error] = _budget_failures(store)  # the deepest call was refused, with the budget named
    assert error["child_error"]["budget"] == "child_depth"
    assert f"({limit + 1} > {limit})" in error["message"]
    assert violations(store) == []
    store.close()


def test_a_fan_out_of_fan_outs_stops_at_the_executions_budget_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    # 20 × 20 × 20 would be 8,420 executions; 20 × 20 concurrent children of children
    # writing one SQLite file is where "database is locked" used to leave some `running`
    code, store = _run(
        tmp_path, "fan.yaml", FAN, "--set", "width=20", "--budget", "child_executions=400"
    )
    assert code == 1
    records = store.executions()
    assert len(records) <= 401
    statuses = {r["status"] for r in records}
    assert "running" not in statuses, statuses
    errors = _budget_failures(store)
    assert errors and all(e["child_error"]["budget"] == "child_executions" for e in errors)
    assert violations(store) == []
    store.close()
