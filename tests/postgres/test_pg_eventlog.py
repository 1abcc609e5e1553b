"""The PostgreSQL event log and result store: idempotent, gap-free, concurrent appends."""

from __future__ import annotations

import asyncio
import random

import pytest

from noetlc.runtime.postgres.database import Database
from noetlc.runtime.postgres.errors import DatabaseError
from noetlc.runtime.postgres.eventlog import COPY_THRESHOLD
from noetlc.runtime.postgres.testing import truncate_all
from noetlc.runtime.queue import JobSpec

pytestmark = pytest.mark.postgres


@pytest.fixture
async def db(pg_url):
    await truncate_all(pg_url)
    database = await Database.open(pg_url, max_size=10)
    yield database
    await database.close()


def evs(prefix: str, n: int, start: int = 0, name: str = "task.done") -> list[dict]:
    return [
        {"event_id": f"{prefix}{i}", "name": name, "step": "s", "payload": {"i": i}}
        for i in range(start, start + n)
    ]


@pytest.mark.parametrize("size", [3, COPY_THRESHOLD + 10], ids=["function", "copy"])
async def test_append_is_idempotent_and_numbers_from_one(db, size):
    log = db.events
    await log.create_execution("x", "playbook")
    await log.create_execution("x", "playbook")  # creating twice is harmless
    first = await log.append("x", evs("e", size))
    assert [seq for _, seq in first] == list(range(1, size + 1))
    assert await log.append("x", evs("e", size)) == []
    # A batch mixing stored and new events numbers only the new ones, after the stored.
    mixed = await log.append("x", evs("e", size + 2))
    assert mixed == [(f"e{size}", size + 1), (f"e{size + 1}", size + 2)]
    # Duplicates inside one batch count once.
    assert len(await log.append("x", evs("d", 2) + evs("d", 2))) == 2
    events = await log.read("x")
    assert [e["seq"] for e in events] == list(range(1, size + 5))
    assert events[0]["payload"] == {"i": 0} and events[0]["step"] == "s"
    assert [e["seq"] for e in await log.read("x", after_seq=size)] == list(
        range(size + 1, size + 5)
    )
    assert len(await log.read("x", limit=2)) == 2


@pytest.mark.parametrize("size", [3, COPY_THRESHOLD + 10], ids=["function", "copy"])
async def test_nothing_is_appended_after_the_terminal_event(db, size):
    """A worker that starts or finishes an action while the server ends the execution (or a
    cancel racing the server's own end) cannot write past the end: the store drops it."""
    log = db.events
    await log.create_execution("x", "playbook")
    end = {"event_id": "end", "name": "execution.failed", "payload": {}}
    # in one batch: the events up to and with the first terminal event are stored
    stored = await log.append("x", [*evs("a", size), end, *evs("late", 2)])
    assert [seq for _, seq in stored] == list(range(1, size + 2))
    # later batches, a second terminal event included, are dropped whole
    cancel = {"event_id": "cancel", "name": "execution.cancelled", "payload": {}}
    assert await log.append("x", [*evs("b", size), cancel]) == []
    names = [e["name"] for e in await log.read("x")]
    assert names[-1] == "execution.failed" and len(names) == size + 1


async def test_concurrent_appenders_get_gap_free_sequences(db):
    log = db.events
    await log.create_execution("x", "playbook")
    rng = random.Random(7)
    plans = []
    for writer in range(6):
        batches, start = [], 0
        for _ in range(8):
            n = rng.choice([1, 2, 5, 12, COPY_THRESHOLD + 5])
            batches.append(evs(f"w{writer}-", n, start))
            start += n
        plans.append(batches)

    async def writer(batches: list[list[dict]]) -> None:
        for batch in batches:
            await log.append("x", batch)
            await log.append("x", batch[: len(batch) // 2])  # a retry after a lost answer

    await asyncio.wait_for(asyncio.gather(*(writer(p) for p in plans)), 120)
    events = await log.read("x")
    expected = {e["event_id"] for p in plans for b in p for e in b}
    assert [e["seq"] for e in events] == list(range(1, len(expected) + 1))
    assert {e["event_id"] for e in events} == expected
    # Each writer's events keep their order.
    for w in range(6):
        mine = [
            int(e["event_id"].split("-")[1]) for e in events if e["event_id"].startswith(f"w{w}-")
        ]
        assert mine == sorted(mine)
    assert (await log.execution("x"))["last_seq"] == len(expected)


async def test_appends_to_different_executions_are_independent(db):
    log = db.events
    for x in ("a", "b"):
        await log.create_execution(x, "p")
    await asyncio.gather(log.append("a", evs("e", 5)), log.append("b", evs("e", 3)))
    assert [e["seq"] for e in await log.read("a")] == [1, 2, 3, 4, 5]
    assert [e["seq"] for e in await log.read("b")] == [1, 2, 3]  # same ids, other execution


async def test_appending_to_an_unknown_execution_is_an_error(db):
    for size in (1, COPY_THRESHOLD):
        with pytest.raises(DatabaseError) as info:
            await db.events.append("never-created", evs("e", size))
        assert info.value.code == "NOE804"


async def test_execution_records(db):
    log = db.events
    await log.create_execution("p1", "parent")
    await log.create_execution("c1", "child", parent_execution_id="p1")
    await log.finish_execution("p1", "completed", {"status": "completed", "result": [1, 2]})
    parent = await log.execution("p1")
    assert parent["status"] == "completed" and parent["summary"]["result"] == [1, 2]
    assert parent["finished_at"] >= parent["created_at"]
    child = await log.execution("c1")
    assert child["parent_execution_id"] == "p1" and child["status"] == "running"
    assert [r["execution_id"] for r in await log.executions()] == ["p1", "c1"]
    assert await log.execution("nope") is None


async def test_an_append_wakes_a_reader(db):
    log = db.events
    await log.create_execution("x", "p")
    assert await log.wait_for_events("x", 0, timeout=0.05) is False
    waiter = asyncio.create_task(log.wait_for_events("x", 0, timeout=60))
    await asyncio.sleep(0.2)
    assert not waiter.done()
    await log.append("x", evs("e", 1))
    assert await asyncio.wait_for(waiter, 15) is True
    assert await log.wait_for_events("x", 0, timeout=60) is True  # already there


async def test_finishing_an_execution_wakes_a_reader(db):
    # `submit --wait` and a parent's `kind: playbook` call wait for the status, which changes
    # after the last event: the change itself must wake them, not their polling fallback
    log = db.events
    await log.create_execution("x", "p")
    await log.append("x", evs("e", 1))
    waiter = asyncio.create_task(log.wait_for_events("x", 1, timeout=600))
    await asyncio.sleep(0.2)
    assert not waiter.done()
    await log.finish_execution("x", "completed", {"status": "completed"})
    assert await asyncio.wait_for(waiter, 15) is True  # woken: a timeout returns False


async def test_result_store_round_trip(db):
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value
    ref = await db.results.put("exec1/step/0", data, "exec1")
    assert ref["size"] == len(data) and ref["checksum"].startswith("sha256:")
    assert await db.results.get("exec1/step/0") == data
    assert await db.results.put("exec1/step/0", data, "exec1") == ref  # idempotent
    assert await db.results.get("missing") is None
    assert await db.results.delete_execution("exec1") == 1
    assert await db.results.get("exec1/step/0") is None


async def test_append_and_enqueue_is_one_idempotent_transaction(db):
    log = db.events
    await log.create_execution("x", "p")
    jobs = [JobSpec(f"j{i}", "x", f"a{i}", {"i": i}) for i in range(3)]
    stored = await log.append_and_enqueue("x", evs("s", 2), jobs)
    assert stored == [("s0", 1), ("s1", 2)]
    assert [lease.job_id for lease in await db.queue.lease("w", limit=10)] == ["j0", "j1", "j2"]
    # retried after a lost answer: nothing is stored or enqueued twice
    assert await log.append_and_enqueue("x", evs("s", 2), jobs) == []
    assert await db.queue.lease("w", limit=10) == []
    # an unknown execution: neither the events nor the jobs are stored
    with pytest.raises(DatabaseError) as info:
        await log.append_and_enqueue("nope", evs("n", 1), [JobSpec("jn", "nope", "an", {})])
    assert info.value.code == "NOE804"
    assert await db.queue.get("jn") is None


async def test_append_and_enqueue_skips_only_the_jobs_already_stored(db):
    # the plain insert of the usual round fails on a stored job (a takeover re-enqueues what
    # the dead owner enqueued): the batch is inserted again without the stored ones (0006)
    log, notes = db.events, db.notifications
    await log.create_execution("x", "p")
    await log.append_and_enqueue("x", evs("s", 1), [JobSpec("j0", "x", "a0", {"first": True})])
    assert await notes.ensure_listening()
    woken = notes.register("noetl_jobs", "default")
    again = [
        JobSpec("j0", "x", "a0", {"first": False}),
        JobSpec("j1", "x", "a1", {}),
        JobSpec("j2", "x", "a2", {"i": 2}),
        JobSpec("j2", "x", "a2", {"i": 2}),  # twice in one batch
    ]
    assert await log.append_and_enqueue("x", evs("s", 2), again) == [("s1", 2)]
    assert await notes.sleep_on(woken, 15)  # the inserted jobs were announced
    leased = await db.queue.lease("w", limit=10)
    assert [(lease.job_id, lease.payload) for lease in leased] == [
        ("j0", {"first": True}),
        ("j1", {}),
        ("j2", {"i": 2}),
    ]
    notes.unregister("noetl_jobs", "default", woken)


async def test_read_inputs_skips_what_the_vm_does_not_consume(db):
    log = db.events
    await log.create_execution("x", "p")
    await log.append(
        "x",
        [
            {"event_id": "a", "name": "task.done", "source": "worker", "payload": {}},
            {"event_id": "b", "name": "step.done", "source": "worker", "payload": {"r": 1}},
            {"event_id": "c", "name": "step.started", "source": "server", "payload": {}},
        ],
    )
    last, events = await log.read_inputs("x", 0, {"worker"}, {"step.done"})
    assert last == 3 and [(e["event_id"], e["seq"]) for e in events] == [("b", 2)]
    assert events[0]["payload"] == {"r": 1}
    assert await log.read_inputs("x", 3, {"worker"}, {"step.done"}) == (3, [])
    assert await log.read_inputs("nope", 5, {"worker"}, {"step.done"}) == (5, [])


async def test_a_worker_round_commits_picks_leases_completions_and_events_together(db):
    await db.events.create_execution("x", "p")
    await db.queue.enqueue([JobSpec(f"j{i}", "x", f"a{i}", {"i": i}) for i in range(5)])
    with pytest.raises(RuntimeError):
        async with db.queue.round("w") as tx:
            picked = await tx.pick(2)
            assert [p.job_id for p in picked] == ["j0", "j1"]
            # picked rows are locked: another worker's lease passes them by
            assert [lease.job_id for lease in await db.queue.lease("w2", limit=1)] == ["j2"]
            await tx.finish([], [(picked[0], evs("r", 2))])
            raise RuntimeError("the worker failed before the commit")
    # rolled back: the picked jobs are queued again, no event was appended
    assert await db.events.read("x") == []
    assert (await db.queue.get("j0")).status == "queued"  # type: ignore[union-attr]
    threaded = await db.queue.lease("w", limit=1)  # a job running in a thread
    assert [lease.job_id for lease in threaded] == ["j0"]
    async with db.queue.round("w", ttl=30) as tx:
        picked = await tx.pick(2) + await tx.pick(1)  # never the same job twice
        assert [p.job_id for p in picked] == ["j1", "j3", "j4"]
        leased = await tx.lease_picked(picked[2:])
        assert [(lease.job_id, lease.owner) for lease in leased] == [("j4", "w")]
        assert leased[0].lease_id and leased[0].attempt == 1
        finished = await tx.finish(
            [(threaded[0], evs("r", 1))],
            [(picked[0], evs("r", 1, 1)), (picked[1], evs("r", 1, 2))],
        )
        assert finished == {"j0", "j1", "j3"}
    assert [e["event_id"] for e in await db.events.read("x")] == ["r0", "r1", "r2"]
    states = {j: (await db.queue.get(j)) for j in ("j0", "j1", "j3", "j4")}
    assert {j: s.status for j, s in states.items() if s} == {
        "j0": "done",
        "j1": "done",
        "j3": "done",
        "j4": "leased",
    }
    assert states["j1"].owner == "w"  # type: ignore[union-attr]
    # a stale lease finishes nothing; picked jobs that are no longer queued neither
    async with db.queue.round("w") as tx:
        assert await tx.finish([(threaded[0], evs("x", 1))], [(picked[0], [])]) == set()
    assert "x0" not in [e["event_id"] for e in await db.events.read("x")]


async def test_own_notifications_can_be_ignored(db, pg_url):
    other = await Database.open(pg_url, max_size=2)
    try:
        notes = db.notifications
        notes.ignore_own = True
        assert await notes.ensure_listening()
        await db.events.create_execution("x", "p")
        await db.events.create_execution("y", "p")
        woken_x = notes.register("noetl_events", "x")
        woken_y = notes.register("noetl_events", "y")
        # events a server reads (a task's progress notifies another channel)
        await db.events.append("x", evs("own", 1, name="step.done"))  # ours: nobody wakes
        await other.events.append("y", evs("theirs", 1, name="step.done"))
        # notifications arrive in commit order: once y's is here, x's was seen and ignored
        assert await notes.sleep_on(woken_y, 15)
        assert not woken_x.is_set()
        await other.events.append("x", evs("theirs", 1, name="step.done"))
        assert await notes.sleep_on(woken_x, 15)
    finally:
        await other.close()
