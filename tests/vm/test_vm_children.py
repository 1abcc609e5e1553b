"""Reference-first results under replay and resume; `kind: playbook` children: one child per
parent action (a re-run finds the same child), and cancelling the parent cancels the child."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import vm_main as cli
from noetlc.compiler.pipeline import compile_file
from noetlc.runtime.embedded import resume_embedded, run_embedded
from noetlc.runtime.event_store import MemoryStore, SQLiteStore
from noetlc.runtime.replay import check
from noetlc.runtime.stored_program import encode_program
from noetlc.vm.loaded_program import LoadedProgram

PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"


def _payload(path: Path) -> dict[str, Any]:
    unit = compile_file(str(path))
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    payload: dict[str, Any] = unit.payload
    return payload


def test_replay_resolves_references_an_arc_guard_reads(tmp_path: Path) -> None:
    db = str(tmp_path / "n.db")
    store = SQLiteStore(db)
    summary = run_embedded(_payload(PLAYBOOKS / "big_result_guard.yaml"), store=store)
    store.close()
    assert summary["status"] == "completed", summary["error"]
    assert summary["steps"]["count"]["result"] == {"first": "row-0"}
    assert cli.main(["replay", summary["execution_id"], "--db", f"sqlite:///{db}"]) == 0


class _WatchedResults:
    """A result store that records, for each read, whether the control VM was deciding."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.reads: list[bool] = []  # True: read while `ControlVM.step` or `start` ran

    def put_result(self, key: str, data: bytes) -> None:
        self.store.put_result(key, data)

    def get_result(self, key: str) -> bytes | None:
        frames = inspect.stack()
        self.reads.append(
            any(
                f.function in ("step", "start") and f.filename.endswith("control.py")
                for f in frames
            )
        )
        return self.store.get_result(key)


def test_guards_read_references_without_io_and_replay_gives_the_same_answer() -> None:
    """The control VM's guards read a large result (by reference) from memory: the runtime
    loads the references an input event carries before the VM takes it, so no result-store
    read happens during `step`, and a replay that loads them the same way decides the same."""
    payload = _payload(PLAYBOOKS / "big_result_guard.yaml")
    store = MemoryStore()
    summary = run_embedded(payload, store=store)
    assert summary["steps"]["count"]["result"] == {"first": "row-0"}
    events = store.read(summary["execution_id"])
    watched = _WatchedResults(store)
    report = check(LoadedProgram(payload), summary["execution_id"], {}, events, watched)
    assert report.ok, report.divergence
    assert watched.reads and not any(watched.reads)  # loaded before `step`, never during it
    # without the result store, the guard cannot see the rows: the replay decides otherwise
    # (the reference is not resolved at all, rather than read behind the VM's back)
    blind = check(LoadedProgram(payload), summary["execution_id"], {}, events)
    assert not blind.ok


def test_resume_resolves_references_an_arc_guard_reads() -> None:
    payload = _payload(PLAYBOOKS / "big_result_guard.yaml")
    full = MemoryStore()
    summary = run_embedded(payload, store=full)
    execution_id = summary["execution_id"]
    events = full.read(execution_id)
    # the log of a process that died right after `start` answered (its result by reference)
    cut = next(i for i, e in enumerate(events) if e["name"] == "step.done") + 1
    crashed = MemoryStore()
    record = full.execution(execution_id)
    assert record is not None
    crashed.create_execution(
        execution_id,
        payload["metadata"]["name"],
        program=encode_program(payload),
        workload=record["workload"],
    )
    crashed.append(execution_id, [dict(e) for e in events[:cut]])
    for key, data in full._results.items():
        crashed.put_result(key, data)
    resumed = resume_embedded(crashed, execution_id)
    assert resumed["status"] == "completed", resumed["error"]
    assert resumed["steps"]["count"]["result"] == {"first": "row-0"}
    assert resumed["steps"]["wrong"]["runs"] == 0 if "wrong" in resumed["steps"] else True


def _copy(
    source: MemoryStore, target: MemoryStore, execution_id: str, keep: int | None = None
) -> None:
    """An execution as a process that died after `keep` events left it (all: finished)."""
    record = source.execution(execution_id)
    assert record is not None
    target.create_execution(
        execution_id,
        record["playbook"],
        program=record["program"],
        workload=record["workload"],
        parent_id=record["parent_id"],
    )
    events = source.read(execution_id)
    target.append(execution_id, [dict(e) for e in events[:keep]])
    if keep is None:
        target.finish_execution(execution_id, record["status"], record["summary"])


@pytest.mark.parametrize("child_finished", [True, False], ids=["finished", "running"])
def test_a_resumed_parent_finds_its_child_instead_of_starting_another(
    child_finished: bool,
) -> None:
    full = MemoryStore()
    summary = run_embedded(_payload(PLAYBOOKS / "parent_child.yaml"), store=full)
    assert summary["status"] == "completed", summary["error"]
    parent_id = summary["execution_id"]
    [child] = [r for r in full.executions() if r["parent_id"] == parent_id]
    # the parent died while it waited on the child: no task.done of the call in its log
    crashed = MemoryStore()
    parent_events = full.read(parent_id)
    _copy(
        full,
        crashed,
        parent_id,
        next(i for i, e in enumerate(parent_events) if e["name"] == "task.done"),
    )
    child_events = full.read(child["execution_id"])
    cut = (
        None
        if child_finished
        else next(i for i, e in enumerate(child_events) if e["name"] == "step.done")
    )
    _copy(full, crashed, child["execution_id"], cut)
    resumed = resume_embedded(crashed, parent_id)
    assert resumed["status"] == "completed", resumed["error"]
    assert resumed["steps"]["start"]["result"] == {"doubled": 42}
    children = [r for r in crashed.executions() if r["parent_id"] == parent_id]
    assert [r["execution_id"] for r in children] == [child["execution_id"]]
    assert children[0]["status"] == "completed"
    call = next(e for e in crashed.read(parent_id) if e["name"] == "task.done")
    assert call["payload"]["outcome"]["meta"]["child_execution_id"] == child["execution_id"]


DETACHED_CHILD = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: child, path: child}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'one': 1}"}
    next: [{step: second}]
  - step: second
    tool: {kind: python, code: "result = {'two': 2}"}
"""


@pytest.mark.parametrize("parent_finished", [True, False], ids=["parent-done", "parent-running"])
def test_a_resumed_parent_resumes_the_child_it_started_without_waiting(
    tmp_path: Path, parent_finished: bool
) -> None:
    # NoETL's playbook tool without `return_step` starts the child and goes on; the child is an
    # execution of its own that NoETL's server goes on with after a crash. A resumed parent
    # (its call done: the replay does not call again) resumes such a child, once.
    (tmp_path / "child.yaml").write_text(DETACHED_CHILD)
    parent = tmp_path / "parent.yaml"
    parent.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: parent, path: parent}\n"
        "workflow:\n  - step: start\n    tool: {kind: playbook, path: child.yaml}\n"
        "    next: [{step: after}]\n"
        "  - step: after\n    tool: {kind: noop, result: '{{ start.data.status }}'}\n"
    )
    full = MemoryStore()
    summary = run_embedded(_payload(parent), store=full)
    assert summary["status"] == "completed", summary["error"]
    parent_id = summary["execution_id"]
    [child] = [r for r in full.executions() if r["parent_id"] == parent_id]
    assert child["status"] == "completed"
    parent_events = full.read(parent_id)
    call = next(
        i
        for i, e in enumerate(parent_events)
        if "child_execution_id" in ((e["payload"].get("outcome") or {}).get("meta") or {})
    )
    crashed = MemoryStore()
    # the process died after the call was logged (the parent's log ends there, or is whole)
    _copy(full, crashed, parent_id, None if parent_finished else call + 1)
    child_events = full.read(child["execution_id"])
    cut = next(i for i, e in enumerate(child_events) if e["name"] == "step.done")
    _copy(full, crashed, child["execution_id"], cut)
    assert crashed.execution(child["execution_id"])["status"] == "running"
    resumed = resume_embedded(crashed, parent_id)
    assert resumed["status"] == "completed", resumed["error"]
    assert resumed["result"] == "started"
    children = [r for r in crashed.executions() if r["parent_id"] == parent_id]
    assert [r["execution_id"] for r in children] == [child["execution_id"]]
    assert children[0]["status"] == "completed"
    assert children[0]["summary"]["steps"]["second"]["result"] == {"two": 2}
    done = [e for e in crashed.read(child["execution_id"]) if e["name"] == "step.done"]
    assert len(done) == 2  # each step once: the resumed child ran on from its log


def test_cancelling_the_parent_cancels_its_running_child(tmp_path: Path) -> None:
    import threading

    db = str(tmp_path / "n.db")
    store = SQLiteStore(db)  # created (schema, WAL) before other connections open it
    payload = _payload(PLAYBOOKS / "parent_waits.yaml")
    out: dict[str, Any] = {}
    parent = threading.Thread(
        target=lambda: out.update(
            run_embedded(payload, store=SQLiteStore(db), execution_id="parent-cancel")
        )
    )
    parent.start()
    try:
        while not [r for r in store.executions() if r["parent_id"] == "parent-cancel"]:
            assert parent.is_alive()
            parent.join(0.05)
        assert cli.main(["cancel", "parent-cancel", "--db", f"sqlite:///{db}"]) == 0
        parent.join(60)
        assert not parent.is_alive()
        assert out["status"] == "cancelled"
        [child] = [r for r in store.executions() if r["parent_id"] == "parent-cancel"]
        # cancelled, not ended by its 20 s timer
        assert child["status"] == "cancelled", child
        assert "expired" not in (child["summary"] or {}).get("steps", {})
    finally:
        store.close()
