"""Group commit in the embedded runtime (runtime/group_commit.py, docs/runtime.md): inline
noop work is committed in groups, everything is durable before an externally visible effect,
and a process killed with a group open (in memory, or inside its transaction) leaves a log
that is a prefix of the uninterrupted run, from which `resume` reaches the same result."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_file
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import MemoryStore, SQLiteStore
from noetlc.runtime.group_commit import GroupCommit
from noetlc.runtime.replay import check
from noetlc.vm.loaded_program import LoadedProgram

PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"
CONTENT = ("name", "source", "step", "step_run_id", "iteration", "payload")

# `noetl-vm run` that kills itself (SIGKILL) when it is about to commit its group number
# KILL_AT: either before the transaction starts or after the rows are written, at COMMIT
KILLER = """
import os, signal, sys
from noetlc.runtime import group_commit
from noetlc.cli import vm_main as cli

kill_at, where = int(sys.argv[1]), sys.argv[2]
flush = group_commit.GroupCommit.flush


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class KillAtCommit:
    def __init__(self, db):
        self.db = db

    def __getattr__(self, name):
        return getattr(self.db, name)

    def execute(self, sql, *args):
        if sql == "COMMIT":
            die()
        return self.db.execute(sql, *args)


def killing_flush(self) -> None:
    if self.commits == kill_at and self.pending:
        if where == "before_commit":
            die()
        self.store._db = KillAtCommit(self.store._db)
    flush(self)


group_commit.GroupCommit.flush = killing_flush
sys.exit(cli.main(sys.argv[3:]))
"""


def _payload(path: Path) -> dict[str, Any]:
    unit = compile_file(str(path))
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    payload: dict[str, Any] = unit.payload
    return payload


def _content(events: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """What a re-run must reproduce: ids and timestamps differ between runs by design."""
    return [tuple(json.dumps(e.get(f), sort_keys=True) for f in CONTENT) for e in events]


def test_group_commit_bounds_and_flush() -> None:
    store = MemoryStore()
    store.create_execution("g", "g")
    committed: list[int] = []
    group = GroupCommit(store, "g", lambda events: committed.append(len(events)), max_events=3)
    group.add([{"event_id": "1", "name": "x"}, {"event_id": "2", "name": "x"}])
    assert store.read("g") == [] and committed == []  # open: not in the log yet
    group.add([{"event_id": "3", "name": "x"}])
    assert [e["seq"] for e in store.read("g")] == [1, 2, 3] and committed == [3]
    group.add([{"event_id": "4", "name": "x"}])
    group.flush()
    group.flush()  # nothing open: no empty commit
    assert len(store.read("g")) == 4 and committed == [3, 1] and group.commits == 2
    aged = GroupCommit(store, "g", max_seconds=0.0)  # every group is already too old
    aged.add([{"event_id": "5", "name": "x"}])
    assert len(store.read("g")) == 5 and aged.pending == []


def test_inline_noop_loop_is_committed_in_groups(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "noetl.db"))
    batches: list[int] = []
    summary = run_embedded(
        _payload(PLAYBOOKS / "noop_sum.yaml"),
        None,
        store,
        on_events=lambda b: batches.append(len(b)),
    )
    assert summary["status"] == "completed"
    assert summary["steps"]["total"]["result"] == sum(3 * n for n in range(600))
    events = store.read(summary["execution_id"])
    assert len(events) == summary["events"] == sum(batches)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len(batches) < summary["events"] / 100  # groups, not one commit per step
    store.close()


def test_everything_before_a_tool_call_is_durable_when_it_runs(tmp_path: Path) -> None:
    db = tmp_path / "noetl.db"
    store = SQLiteStore(str(db))
    summary = run_embedded(_payload(PLAYBOOKS / "peek_log.yaml"), {"db": str(db)}, store)
    assert summary["status"] == "completed", summary["error"]
    logged = [[e["name"], e["step"]] for e in store.read(summary["execution_id"])]
    store.close()
    seen = summary["steps"]["peek"]["result"]  # the log as the python tool read it, from disk
    scheduled = logged.index(["step.scheduled", "peek"])
    assert seen == logged[: len(seen)]
    assert len(seen) > scheduled  # the inline noop work before it was committed first


@pytest.mark.parametrize("where", ["before_commit", "at_commit"])
def test_kill_with_a_group_open_then_resume_reaches_the_same_result(
    tmp_path: Path, where: str
) -> None:
    playbook = PLAYBOOKS / "noop_sum.yaml"
    payload = _payload(playbook)
    reference_store = MemoryStore()
    reference = run_embedded(payload, None, reference_store)
    uninterrupted = reference_store.read(reference["execution_id"])

    db_path = tmp_path / "noetl.db"
    db = f"sqlite:///{db_path}"
    killed = subprocess.run(
        [sys.executable, "-c", KILLER, "1", where, "run", str(playbook), "--db", db, "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    store = SQLiteStore(str(db_path))
    [record] = store.executions()
    assert record["status"] == "running"
    execution = record["execution_id"]
    before = store.read(execution)
    store.close()
    # only the first group is in the log, whole: a gap-free prefix of the uninterrupted run
    assert 0 < len(before) < len(uninterrupted)
    assert [e["seq"] for e in before] == list(range(1, len(before) + 1))
    assert _content(before) == _content(uninterrupted[: len(before)])

    resumed = subprocess.run(
        [sys.executable, "-m", "noetlc.cli.vm_main", "resume", execution, "--db", db, "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout.splitlines()[-1])
    for field in ("status", "steps", "ctx", "result", "error"):
        assert summary[field] == reference[field], field

    store = SQLiteStore(str(db_path))
    events = store.read(execution)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    # the lost group was redone: the same events, with `execution.resumed` where it resumed
    assert events[len(before)]["name"] == "execution.resumed"
    redone = before + events[len(before) + 1 :]
    assert _content(redone) == _content(uninterrupted)
    report = check(LoadedProgram(payload), execution, record["workload"], events)
    assert report.ok, report.divergence
    assert report.vm.status == "completed"
    store.close()
