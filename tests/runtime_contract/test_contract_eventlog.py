"""The backend a distributed server and worker run on (runtime/backend.py): the event log,
append-and-enqueue and the worker round behave the same in memory and on PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from noetlc.runtime.memory_backend import MemoryBackend
from noetlc.runtime.postgres.testing import truncate_all
from noetlc.runtime.queue import JobSpec
from noetlc.vm.protocol import INPUT_NAMES, INPUT_SOURCES, Event, EventName, Source, envelope


@pytest.fixture(params=["memory", "postgres"])
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    if request.param == "memory":
        clock = FakeClock()
        backend = MemoryBackend(clock)
        backend.fake_clock = clock  # type: ignore[attr-defined]
        yield backend
        return
    url = request.getfixturevalue("pg_url")
    from noetlc.runtime.postgres.database import Database

    await truncate_all(url)
    db = await Database.open(url, max_size=4)
    yield db
    await db.close()


class FakeClock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _event(event_id: str, name: str = EventName.TASK_DONE, source: str = Source.WORKER) -> Event:
    return envelope(name, source, event_id=event_id, step="s", step_run_id="s#1", payload={"k": 1})


async def test_append_assigns_gap_free_seq_and_is_idempotent(cluster: Any) -> None:
    log = cluster.events
    await log.create_execution("x", "p")
    await log.create_execution("y", "p")
    first = await log.append("x", [_event("a"), _event("b")])
    assert first == [("a", 1), ("b", 2)]
    assert await log.append("x", [_event("a"), _event("c")]) == [("c", 3)]
    assert await log.append("y", [_event("a")]) == [("a", 1)]  # same id, other execution
    events = await log.read("x")
    assert [(e["event_id"], e["seq"], e["name"]) for e in events] == [
        ("a", 1, "task.done"),
        ("b", 2, "task.done"),
        ("c", 3, "task.done"),
    ]
    assert events[0]["payload"] == {"k": 1} and events[0]["ts"] > 0
    assert [e["seq"] for e in await log.read("x", 1, 1)] == [2]
    record = await log.execution("x")
    assert record is not None and record["status"] == "running" and record["last_seq"] == 3


async def test_read_inputs_skips_what_the_vm_does_not_consume(cluster: Any) -> None:
    log = cluster.events
    await log.create_execution("x", "p")
    await log.append(
        "x",
        [
            _event("t"),
            _event("d", EventName.STEP_DONE),
            _event("s", EventName.STEP_SCHEDULED, Source.SERVER),
            _event("c", EventName.EXECUTION_CANCELLED, Source.CLIENT),
        ],
    )
    last, inputs = await log.read_inputs("x", 0, INPUT_SOURCES, INPUT_NAMES)
    assert last == 4 and [e["event_id"] for e in inputs] == ["d", "c"]
    last, inputs = await log.read_inputs("x", 4, INPUT_SOURCES, INPUT_NAMES)
    assert last == 4 and inputs == []


async def test_finish_execution_records_status_and_summary(cluster: Any) -> None:
    log = cluster.events
    await log.create_execution("x", "p")
    await log.finish_execution("x", "completed", {"status": "completed"})
    record = await log.execution("x")
    assert record is not None
    assert record["status"] == "completed" and record["summary"] == {"status": "completed"}
    assert await log.wait_for_events("x", 0, 0.05) is False  # no events, timed out


async def test_append_and_enqueue_then_a_worker_round(cluster: Any) -> None:
    log, queue = cluster.events, cluster.queue
    await log.create_execution("x", "p")
    jobs = [JobSpec(f"j{i}", "x", f"a{i}", {"step": "s"}) for i in range(3)]
    stored = await log.append_and_enqueue("x", [_event("s1", EventName.STEP_SCHEDULED)], jobs)
    assert stored == [("s1", 1)]
    await queue.cancel_jobs(["j2"])  # cancelled before anyone picks it: never picked
    async with queue.round("w", ttl=10) as tx:
        picked = await tx.pick(10)
        assert sorted(p.job_id for p in picked) == ["j0", "j1"]
        ran, leased = picked[:1], await tx.lease_picked(picked[1:])
        await tx.finish([], [(ran[0], [_event("e0")._replace(action_id=ran[0].action_id)])])
    assert [e["event_id"] for e in await log.read("x")] == ["s1", "e0"]
    state = await queue.get(ran[0].job_id)
    assert state is not None and state.status == "done"
    # a job cancelled while it ran: finishing it logs nothing
    await queue.cancel_jobs([leased[0].job_id])
    async with queue.round("w", ttl=10) as tx:
        late = [_event("late")._replace(action_id=leased[0].action_id)]
        assert await tx.finish([(leased[0], late)], []) == set()
    assert [e["event_id"] for e in await log.read("x")] == ["s1", "e0"]


async def _age(cluster: Any, seconds: float) -> None:
    """Let `seconds` pass for the backend's lease clock."""
    clock = getattr(cluster, "fake_clock", None)
    if clock is not None:
        clock.now += seconds
    else:
        await asyncio.sleep(seconds)


async def test_a_completion_whose_lease_is_no_longer_current_is_refused_with_its_events(
    cluster: Any,
) -> None:
    # fencing: a worker paused past its lease (its job reaped and leased again) finishes
    # nothing and logs nothing; the live holder's completion is the one that counts
    log, queue = cluster.events, cluster.queue
    await log.create_execution("x", "p")
    await queue.enqueue([JobSpec("j1", "x", "a1", {"step": "s"}), JobSpec("j2", "x", "a2", {})])
    [stale] = await queue.lease("w1", ttl=0.2)
    await _age(cluster, 0.6)
    assert [(r.job_id, r.status, r.attempt) for r in await queue.reap()] == [("j1", "queued", 2)]
    [live] = await queue.lease("w2", ttl=30)
    assert (live.job_id, live.attempt) == ("j1", 2) and live.lease_id != stale.lease_id

    def said(lease: Any, n: int) -> list[Event]:
        return [
            _event(f"{lease.action_id}:{lease.attempt}:{i}")._replace(action_id=lease.action_id)
            for i in range(n)
        ]

    # the stale completion is refused whole; a job the same round ran is not affected
    async with queue.round("w1", ttl=30) as tx:
        [picked] = await tx.pick(1)
        assert picked.job_id == "j2"
        assert await tx.finish([(stale, said(stale, 2))], [(picked, said(picked, 1))]) == {"j2"}
    assert [e["event_id"] for e in await log.read("x")] == ["a2:1:0"]
    state = await queue.get("j1")
    assert state is not None and state.status == "leased" and state.lease_id == live.lease_id
    # a running job's early events (a finished task's) are fenced the same way
    assert await queue.append_fenced(stale, said(stale, 1)) is False
    assert [e["event_id"] for e in await log.read("x")] == ["a2:1:0"]
    # the stale and the live completion of one job in one batch: only the live one counts
    async with queue.round("w2", ttl=30) as tx:
        done = [(stale, said(stale, 2)), (live, said(live, 3))]
        assert await tx.finish(done, []) == {"j1"}
    assert [e["event_id"] for e in await log.read("x")] == ["a2:1:0", "a1:2:0", "a1:2:1", "a1:2:2"]
    assert [e["seq"] for e in await log.read("x")] == [1, 2, 3, 4]
    state = await queue.get("j1")
    assert state is not None and state.status == "done"
    assert await queue.append_fenced(live, said(live, 4)) is False  # finished: no lease now
    assert len(await log.read("x")) == 4


async def test_a_conditional_append_refuses_an_ended_log_or_a_moved_end(cluster: Any) -> None:
    """`append_if` (what a cancel, a signal and a timer append): nothing after the log's
    terminal event, nothing when the log moved past the `last_seq` its writer read."""
    log = cluster.events
    await log.create_execution("x", "p")
    await log.append("x", [_event("a")])
    assert await log.append_if("x", [_event("b")], last_seq=2) is None  # it ends at 1
    assert await log.append_if("x", [_event("b")], last_seq=1) == [("b", 2)]
    assert await log.append_if("x", [_event("c")]) == [("c", 3)]
    end = _event("end", EventName.EXECUTION_CANCELLED, Source.CLIENT)
    assert await log.append_if("x", [end], last_seq=3) == [("end", 4)]
    signal = _event("sig", EventName.SIGNAL_RECEIVED, Source.CLIENT)
    assert await log.append_if("x", [signal]) is None
    assert await log.append_if("x", [_event("d")], last_seq=4) is None
    assert [e["event_id"] for e in await log.read("x")] == ["a", "b", "c", "end"]


async def test_create_child_counts_the_roots_whole_tree(cluster: Any) -> None:
    """`create_child` (a distributed `kind: playbook` start): the root's tree, all levels,
    holds `limit` executions at most; an existing child is not counted again."""
    log = cluster.events
    await log.create_execution("root", "p")
    assert await log.create_child("a", "p", "root", "root", 3) is None
    assert await log.create_child("b", "p", "a", "root", 3) is None
    assert await log.create_child("a", "p", "root", "root", 3) is None  # exists: not counted
    assert await log.create_child("c", "p", "b", "root", 3) is None
    assert await log.create_child("d", "p", "root", "root", 3) == 4  # the 4th is refused
    assert await log.execution("d") is None
    assert await log.create_child("d", "p", "root", "root", 0) is None  # 0: no limit
    assert (await log.execution("d"))["parent_execution_id"] == "root"


async def test_reserve_bytes_grants_within_the_budget_only(cluster: Any) -> None:
    """`reserve_bytes` (a distributed execution's `stored_bytes`): granted while the total
    stays within the limit; refused with the total it would reach, nothing counted."""
    log = cluster.events
    await log.create_execution("x", "p")
    assert await log.reserve_bytes("x", 600, 1000) is None
    assert await log.reserve_bytes("x", 500, 1000) == 1100  # refused: 600 stay reserved
    assert await log.reserve_bytes("x", 400, 1000) is None  # exactly the budget
    assert await log.reserve_bytes("x", 1, 1000) == 1001
