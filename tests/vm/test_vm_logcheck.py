"""The log checker (runtime/logcheck.py): a real run's log keeps every invariant, and each
rule catches the log that breaks it; `noetl-vm replay` fails on a violation, `replay --all`
checks a whole store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import vm_main
from noetlc.runtime.event_store import SQLiteStore
from noetlc.runtime.logcheck import check_children, check_log, child_calls

LOOP = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: checked}
workload: {n: 5}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: each}]}
  - step: each
    loop: {in: "{{ range(workload.n) | list }}", iterator: x, spec: {mode: parallel}}
    tool:
      - name: work
        kind: python
        input: {x: "{{ x }}"}
        code: |
          result = x * 2
    next: {arcs: [{step: end}]}
  - step: end
    tool: {kind: noop}
"""


@pytest.fixture
def ran(tmp_path: Path) -> tuple[str, str, list[dict[str, Any]]]:
    (tmp_path / "loop.yaml").write_text(LOOP)
    db = f"sqlite:///{tmp_path / 'n.db'}"
    assert vm_main.main(["run", str(tmp_path / "loop.yaml"), "--quiet", "--db", db]) == 0
    store = SQLiteStore(str(tmp_path / "n.db"))
    [record] = store.executions()
    events = store.read(record["execution_id"])
    store.close()
    return db, record["execution_id"], events


def _rules(execution: str, events: list[dict[str, Any]], status: str | None) -> list[str]:
    return [v.rule for v in check_log(execution, events, status)]


def _renumber(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**e, "seq": i} for i, e in enumerate(events, 1)]


def test_a_real_log_keeps_every_invariant(ran: tuple[str, str, list[dict[str, Any]]]) -> None:
    _, execution, events = ran
    assert check_log(execution, events, "completed") == []
    assert _rules(execution, events[:-1], "running") == []  # a prefix is a running log


def test_each_rule_catches_its_broken_log(ran: tuple[str, str, list[dict[str, Any]]]) -> None:
    _, ex, events = ran
    done = next(i for i, e in enumerate(events) if e["name"] == "loop.iteration.done")
    # a seq gap
    assert _rules(ex, events[:3] + events[4:], "completed") == ["seq"]
    # an iteration recorded twice (the split brain of issue: same action id)
    twice = _renumber([*events[:-1], events[done], events[-1]])
    assert _rules(ex, twice, "completed") == ["duplicate-result"]
    # ... unless a retry of the action says so
    retry = {**events[done], "name": "task.retry", "event_id": "r", "payload": {}}
    assert _rules(ex, _renumber([*events[:-1], retry, events[done], events[-1]]), None) == []
    # a result before its start
    started = next(
        i
        for i, e in enumerate(events)
        if e["name"] == "loop.iteration.started" and e["iteration"] == events[done]["iteration"]
    )
    moved = events[:started] + events[started + 1 :]
    assert "unstarted-result" in _rules(ex, _renumber(moved), None)
    # two terminal events, and something after the first
    cancel = {"name": "execution.cancelled", "source": "client", "payload": {}}
    late = {**events[done], "event_id": "late"}
    rules = _rules(ex, _renumber([*events, cancel, late]), "completed")
    assert rules.count("after-terminal") == 2 and rules.count("terminal") == 1
    # the row against the log
    assert _rules(ex, events, "running") == ["row-state"]
    assert _rules(ex, events, "cancelled") == ["row-state"]
    assert _rules(ex, events[:-1], "completed") == ["row-state"]


def test_new_event_names_are_taken_generically(
    ran: tuple[str, str, list[dict[str, Any]]],
) -> None:
    _, ex, events = ran
    extra = {"name": "task.handed", "source": "server", "step_run_id": "each#1", "payload": {}}
    assert _rules(ex, _renumber([*events[:-1], extra, events[-1]]), "completed") == []


def test_children_end_with_their_parents() -> None:
    parent = {"execution_id": "p"}
    call = {
        "name": "step.done",
        "source": "worker",
        "payload": {
            "task": "call",
            "call": 0,
            "attempt": 1,
            "status": "ok",
            "result": 1,
            "outcome": {"meta": {"child_execution_id": "c"}},
        },
    }
    ended = [call, {"name": "workflow.finished", "source": "server"}]
    assert child_calls(ended)["c"]["status"] == "ok"
    assert check_children(parent, ended, [{"execution_id": "c", "status": "completed"}]) == []
    [orphan] = check_children(parent, ended[1:], [{"execution_id": "c", "status": "running"}])
    assert orphan.rule == "child" and "still running" in orphan.message
    [wrong] = check_children(parent, ended, [{"execution_id": "c", "status": "failed"}])
    assert "took it as ok" in wrong.message
    # a parent still running may wait for its running child
    assert check_children(parent, [], [{"execution_id": "c", "status": "running"}]) == []


def test_replay_fails_on_a_violation_and_all_checks_the_store(
    ran: tuple[str, str, list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db, execution, events = ran
    assert vm_main.main(["replay", execution, "--db", db]) == 0
    assert vm_main.main(["replay", "--all", "--db", db]) == 0
    assert "1 of 1 executions ok" in capsys.readouterr().out
    # the row says running while the log ended: replay reproduces the log, the checker fails
    with sqlite3.connect(tmp_path / "n.db") as conn:
        conn.execute("UPDATE executions SET status = 'running'")
    assert vm_main.main(["replay", execution, "--db", db, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True and out["violations"] == [
        f"{execution} at seq {events[-1]['seq']}: [row-state] the row is running, the log completed"
    ]
    assert vm_main.main(["replay", "--all", "--db", db]) == 1
    assert "[row-state]" in capsys.readouterr().out
    assert vm_main.main(["replay", "--db", db]) == 2  # neither an id nor --all
    assert vm_main.main(["replay", execution, "--all", "--db", db]) == 2
