"""One idle worker woken per job (migration 0011): a worker whose statement leased nothing
while it is about to sleep (`idle` > 0) registers in `job_waiters` with a channel of its own;
an enqueue takes one registered waiter per job and notifies its channel, and notifies the
pool's `noetl_jobs` only when fewer waiters than jobs were registered. A registration is
withdrawn by the worker's next statement that takes jobs or says it will not sleep, and
expires. A statement that only leases commits without waiting for the WAL flush."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from noetlc.runtime.backend import JOBS
from noetlc.runtime.postgres.database import Database
from noetlc.runtime.postgres.queries import q
from noetlc.runtime.postgres.queue import _finish_args, _finished
from noetlc.runtime.postgres.testing import truncate_all
from noetlc.runtime.queue import JobSpec

pytestmark = pytest.mark.postgres

# A pool of this run's own: notification channels are database-wide, so another schema's
# server or worker in the same database (another test run, a CLI) notifies `noetl_jobs` too;
# its payload is its pool, never this one.
POOL = f"wakeups-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def workers(pg_url):
    """Three processes' handles: two workers and the server that enqueues."""
    await truncate_all(pg_url)
    handles = [await Database.open(pg_url, max_size=2) for _ in range(3)]
    yield handles
    for db in handles:
        await db.close()


async def _idle(db: Database, owner: str, seconds: float = 30.0) -> asyncio.Event:
    """`owner` finds nothing, registers as waiting, and listens (its round's registration)."""
    woken = db.notifications.register(JOBS, POOL)
    assert await db.notifications.ensure_listening(JOBS)
    assert await db.queue.finish_and_lease([], owner, pool=POOL, limit=4, idle=seconds) == (
        set(),
        [],
    )
    return woken


def _jobs(*ids: str) -> list[JobSpec]:
    return [JobSpec(i, "x", i, {}, pool=POOL) for i in ids]


async def _settle() -> None:
    await asyncio.sleep(0.3)  # notifications of the enqueue delivered by now


async def test_one_job_wakes_one_idle_worker(workers):
    a, b, server = workers
    woken_a, woken_b = await _idle(a, "wa"), await _idle(b, "wb")
    await server.queue.enqueue(_jobs("j1"))
    await _settle()
    assert woken_a.is_set() != woken_b.is_set()  # exactly one
    # the other is still registered: the next job wakes it
    other = woken_b if woken_a.is_set() else woken_a
    await server.queue.enqueue(_jobs("j2"))
    await _settle()
    assert other.is_set()


async def test_two_jobs_wake_both_and_more_jobs_than_waiters_wake_the_pool(workers):
    a, b, server = workers
    woken_a, woken_b = await _idle(a, "wa"), await _idle(b, "wb")
    await server.queue.enqueue(_jobs("j1", "j2"))
    await _settle()
    assert woken_a.is_set() and woken_b.is_set()
    # nobody registered any more: every listener of the pool hears the next enqueue
    listening = a.notifications.register(JOBS, POOL)
    await server.queue.enqueue(_jobs("j3"))
    await _settle()
    assert listening.is_set()


async def test_a_worker_that_takes_jobs_is_not_woken_in_place_of_an_idle_one(workers):
    a, b, server = workers
    await server.queue.enqueue(_jobs("j1"))
    woken_a = a.notifications.register(JOBS, POOL)
    assert await a.notifications.ensure_listening(JOBS)
    # registered (its statement leased nothing), but ...
    assert await a.queue.finish_and_lease([], "wa", pool=POOL, limit=0, idle=30.0) == (set(), [])
    # ... a statement of its that takes jobs withdraws it, whatever `idle` says
    _, leases = await a.queue.finish_and_lease([], "wa", pool=POOL, limit=1, idle=30.0)
    assert [lease.job_id for lease in leases] == ["j1"]
    woken_a.clear()
    woken_b = await _idle(b, "wb")
    await server.queue.enqueue(_jobs("j2"))
    await _settle()
    assert woken_b.is_set() and not woken_a.is_set()


async def test_an_expired_registration_wakes_nobody_in_place_of_the_pool(workers):
    a, b, server = workers
    await _idle(a, "wa", seconds=0.05)  # a worker that died asleep
    await asyncio.sleep(0.2)
    listening = b.notifications.register(JOBS, POOL)
    assert await b.notifications.ensure_listening(JOBS)
    await server.queue.enqueue(_jobs("j1"))
    await _settle()
    assert listening.is_set()


async def test_a_round_transaction_registers_and_withdraws(workers):
    a, b, server = workers
    woken_a = a.notifications.register(JOBS, POOL)
    assert await a.notifications.ensure_listening(JOBS)
    async with a.queue.round("wa", pool=POOL) as tx:
        assert await tx.pick(4) == []
        assert await tx.finish([], [], idle=30.0) == set()  # it will sleep
    await server.queue.enqueue(_jobs("j1"))
    await _settle()
    assert woken_a.is_set()
    async with a.queue.round("wa", pool=POOL) as tx:
        [picked] = await tx.pick(4)
        await tx.finish([], [(picked, [])])  # busy: no registration
    woken_b = await _idle(b, "wb")
    woken_a.clear()
    await server.queue.enqueue(_jobs("j2"))
    await _settle()
    assert woken_b.is_set() and not woken_a.is_set()


async def test_only_a_lease_commits_without_waiting_for_the_flush(workers):
    a, _, server = workers
    await server.queue.enqueue(_jobs("j1"))
    async with a.pool.acquire() as conn:
        async with conn.transaction():
            rows = await conn.fetch(
                q("finish_and_lease_jobs"), *_finish_args([], [], "wa", POOL, 1, 30.0)
            )
            _, [lease] = _finished(list(rows))
            assert await conn.fetchval("SHOW synchronous_commit") == "off"
        assert await conn.fetchval("SHOW synchronous_commit") == "on"  # that transaction only
        async with conn.transaction():
            done = [(lease, [])]
            rows = await conn.fetch(
                q("finish_and_lease_jobs"), *_finish_args(done, [], "wa", POOL, 1, 30.0)
            )
            assert _finished(list(rows)) == ({"j1"}, [])
            # a finish (with the job's events) waits for its flush as always
            assert await conn.fetchval("SHOW synchronous_commit") == "on"


async def test_a_worker_registers_while_it_sleeps_and_withdraws_when_it_stops(workers):
    from noetlc.runtime.worker import Worker

    a, _, server = workers
    worker = Worker(a, owner="wa", concurrency=2, ttl=5.0, poll=0.1)
    stop = asyncio.Event()
    running = asyncio.ensure_future(worker.run(stop))

    async def registered() -> list[str]:
        async with server.pool.acquire() as conn:
            return [r[0] for r in await conn.fetch("SELECT owner FROM job_waiters")]

    try:
        for _ in range(100):
            if await registered() == ["wa"]:
                break
            await asyncio.sleep(0.05)
        assert await registered() == ["wa"]  # idle: it asked to be woken for the next job
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)
    assert await registered() == []


async def test_a_round_transaction_withdraws_and_does_not_register(workers):
    """A worker in a stream of inline jobs finishes them in round transactions, which do not
    register it (measured: costly, and such enqueues wake the pool anyway) but withdraw the
    registration of its earlier one-statement round; its next one-statement round registers
    again."""
    from noetlc.runtime.worker import Worker

    a, _, server = workers
    worker = Worker(a, owner="wa", concurrency=2, ttl=5.0, poll=0.05)

    async def registered() -> list[str]:
        async with server.pool.acquire() as conn:
            return [r[0] for r in await conn.fetch("SELECT owner FROM job_waiters")]

    try:
        await worker._round()  # a one-statement round that finds nothing: registered
        assert await registered() == ["wa"]
        worker._inline_seen = worker._burst = True  # as after a full pick of inline jobs
        await worker._round()  # a round transaction: withdrawn, not registered again
        assert await registered() == []
        await worker._round()  # the pick was not full: one statement again, registered
        assert await registered() == ["wa"]
    finally:
        worker.threads.shutdown(wait=False)
        worker.results.close()
