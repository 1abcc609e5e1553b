"""One contract for every event store: memory, SQLite and PostgreSQL.

Store-assigned gap-free `seq`, appends idempotent on `event_id`, the envelope round trip,
the execution record with its program and workload, cancel/signal requests, the result store.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noetlc.runtime.event_store import MemoryStore, SQLiteStore, StoreError
from noetlc.runtime.store_url import open_store


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        s: Any = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(str(tmp_path / "contract.db"))
    else:
        from noetlc.runtime.postgres.event_store import PostgresStore

        s = PostgresStore(request.getfixturevalue("pg_url"))
    yield s
    s.close()


def _event(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "event_id": f"e{i}",
        "name": "task.done",
        "source": "worker",
        "step": "start",
        "payload": {"i": i},
        **extra,
    }


def test_seq_is_assigned_gap_free_and_appends_are_idempotent(store: Any) -> None:
    execution = str(uuid.uuid4())
    store.create_execution(execution, "p", program=b"\x01\x02", workload={"a": 1})
    base = len(store.read(execution))  # PostgreSQL records the submission as event 1
    assert store.append(execution, [_event(i) for i in range(5)]) == 5
    assert store.append(execution, [_event(i) for i in range(5)]) == 0
    assert store.append(execution, [_event(i) for i in range(3, 7)]) == 2
    events = store.read(execution)
    assert [e["seq"] for e in events] == list(range(1, base + 8))
    assert [e["event_id"] for e in events[base:]] == [f"e{i}" for i in range(7)]
    assert [e["seq"] for e in store.read(execution, after_seq=base + 5)] == [base + 6, base + 7]


def test_the_envelope_round_trips(store: Any) -> None:
    execution = str(uuid.uuid4())
    store.create_execution(execution, "p")
    event = _event(
        1,
        step_run_id="start#1",
        task_run_id="a:0",
        iteration=3,
        attempt=2,
        action_id="a",
        parent_id="parent",
        pc=7,
        payload={"nested": {"list": [1, "x", None]}},
    )
    store.append(execution, [dict(event)])
    [stored] = [e for e in store.read(execution) if e["event_id"] == "e1"]
    for field in (
        "name",
        "source",
        "step",
        "step_run_id",
        "task_run_id",
        "iteration",
        "attempt",
        "action_id",
        "parent_id",
        "pc",
        "payload",
    ):
        assert stored[field] == event[field], field
    assert stored["execution_id"] == execution and isinstance(stored["ts"], float)


@pytest.mark.log_violations  # a row finished without a log: the store's contract, not a run
def test_execution_record_keeps_program_and_workload(store: Any) -> None:
    execution = str(uuid.uuid4())
    store.create_execution(execution, "playbook", program=b"\x00bytes", workload={"k": [1]})
    record = store.execution(execution)
    assert record["playbook"] == "playbook" and record["status"] == "running"
    assert record["program"] == b"\x00bytes" and record["workload"] == {"k": [1]}
    store.finish_execution(execution, "completed", {"status": "completed"})
    record = store.execution(execution)
    assert record["status"] == "completed" and record["summary"] == {"status": "completed"}
    assert execution in {r["execution_id"] for r in store.executions()}
    assert store.execution("missing") is None


def test_requests_reach_the_execution(store: Any) -> None:
    execution = str(uuid.uuid4())
    store.create_execution(execution, "p")
    store.request(execution, "signal", "go", {"x": 1})
    store.request(execution, "cancel")
    requests = store.requests(execution)
    if requests:  # memory and SQLite queue requests for the running process
        assert [(r["kind"], r["name"], r["data"]) for r in requests] == [
            ("signal", "go", {"x": 1}),
            ("cancel", None, None),
        ]
        assert store.requests(execution, requests[0]["request_id"]) == requests[1:]
    else:  # PostgreSQL appends them to the log, where the owning server reads them (a cancel
        # as a request the server answers with the terminal event)
        names = [e["name"] for e in store.read(execution)]
        assert names[-2:] == ["signal.received", "execution.cancel.requested"]


def test_result_store(store: Any) -> None:
    key = f"r-{uuid.uuid4().hex}"
    assert store.get_result(key) is None
    store.put_result(key, b"x" * 1000)
    store.put_result(key, b"x" * 1000)
    assert store.get_result(key) == b"x" * 1000


def test_bad_urls() -> None:
    for url in ("mysql://x", "nonsense", "sqlite://relative-without-third-slash"):
        with pytest.raises(StoreError):
            open_store(url)
