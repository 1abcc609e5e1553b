"""The job queue contract: every implementation of runtime/queue.py's JobQueue passes it."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

from noetlc.runtime.queue import JobSpec

TTL = 0.4  # short leases for expiry tests; `age` waits a little longer
PAST_TTL = 0.6


def jobs(n: int, *, pool: str = "default", execution: str = "e1", **kw: object) -> list[JobSpec]:
    return [
        JobSpec(f"{execution}:job{i}", execution, f"{execution}:a{i}", {"i": i}, pool, **kw)  # type: ignore[arg-type]
        for i in range(n)
    ]


async def test_enqueue_is_idempotent_on_job_id(backend):
    q = backend.queue
    assert await q.enqueue(jobs(3)) == 3
    assert await q.enqueue(jobs(4)) == 1
    assert await q.enqueue([]) == 0
    state = await q.get("e1:job0")
    assert state.status == "queued" and state.attempt == 1 and state.payload == {"i": 0}
    assert await q.get("nope") is None


async def test_lease_is_fifo_per_pool_and_carries_a_token(backend):
    q = backend.queue
    await q.enqueue(jobs(5, pool="a") + jobs(2, pool="b", execution="e2"))
    first = await q.lease("w1", pool="a", limit=3)
    assert [x.job_id for x in first] == ["e1:job0", "e1:job1", "e1:job2"]
    assert all(x.attempt == 1 and x.owner == "w1" and x.pool == "a" for x in first)
    assert len({x.lease_id for x in first}) == 3
    assert first[0].payload == {"i": 0}
    rest = await q.lease("w2", pool="a", limit=10)
    assert [x.job_id for x in rest] == ["e1:job3", "e1:job4"]
    assert await q.lease("w3", pool="a", limit=10) == []
    assert [x.job_id for x in await q.lease("w3", pool="b", limit=10)] == ["e2:job0", "e2:job1"]
    assert (await q.get("e1:job0")).status == "leased"


async def test_concurrent_consumers_complete_every_job_exactly_once(backend):
    q = backend.queue
    total = 120
    await q.enqueue(jobs(total, pool="c"))
    leased: Counter[str] = Counter()
    completed: Counter[str] = Counter()

    async def consumer(name: str, combined: bool) -> None:
        idle = 0
        batch: list = []
        while idle < 3:
            if combined:  # half the consumers use the one-step loop
                accepted, batch = await q.complete_and_lease(batch, name, pool="c", limit=7)
                completed.update(accepted)
            else:
                batch = await q.lease(name, pool="c", limit=7)
            if not batch:
                idle += 1
                await asyncio.sleep(0)
                continue
            idle = 0
            leased.update(x.job_id for x in batch)
            await asyncio.sleep(0)
            if not combined:
                completed.update(await q.complete(batch))

    await asyncio.wait_for(asyncio.gather(*(consumer(f"w{i}", i % 2 == 1) for i in range(4))), 60)
    assert len(leased) == total and set(leased.values()) == {1}
    assert len(completed) == total and set(completed.values()) == {1}
    for i in (0, total - 1):
        assert (await q.get(f"e1:job{i}")).status == "done"


async def test_complete_and_lease_in_one_step(backend):
    q = backend.queue
    await q.enqueue(jobs(5))
    accepted, first = await q.complete_and_lease([], "w1", limit=2)
    assert accepted == set() and [x.job_id for x in first] == ["e1:job0", "e1:job1"]
    accepted, second = await q.complete_and_lease(first, "w1", limit=2)
    assert accepted == {"e1:job0", "e1:job1"}
    assert [x.job_id for x in second] == ["e1:job2", "e1:job3"]
    assert (await q.get("e1:job0")).status == "done"
    stale, third = await q.complete_and_lease(first, "w1", limit=5)
    assert stale == set() and [x.job_id for x in third] == ["e1:job4"]


async def test_expired_lease_is_requeued_with_the_next_attempt(backend):
    q = backend.queue
    await q.enqueue(jobs(1))
    (old,) = await q.lease("w1", ttl=TTL)
    assert await q.reap() == []  # not expired yet
    await backend.age(PAST_TTL)
    (reaped,) = await q.reap()
    assert (reaped.job_id, reaped.status, reaped.attempt) == ("e1:job0", "queued", 2)
    assert "w1" in reaped.reason
    (new,) = await q.lease("w2")
    assert new.attempt == 2 and new.lease_id != old.lease_id
    # The first worker wakes up late: its completion, heartbeat and release are all stale.
    assert await q.complete([old]) == set()
    assert await q.heartbeat([old]) == set()
    assert await q.release([old]) == set()
    assert await q.complete([new]) == {"e1:job0"}
    assert await q.complete([new]) == set()  # completing twice is not accepted twice
    assert (await q.get("e1:job0")).status == "done"


async def test_stale_completion_after_expiry_but_before_reaping_is_still_the_owners(backend):
    q = backend.queue
    await q.enqueue(jobs(1))
    (lease,) = await q.lease("w1", ttl=TTL)
    await backend.age(PAST_TTL)
    # Nobody re-granted the job yet: the late owner may still finish it.
    assert await q.complete([lease]) == {"e1:job0"}
    assert await q.reap() == []


async def test_a_job_out_of_attempts_fails(backend):
    q = backend.queue
    await q.enqueue(jobs(1, max_attempts=2))
    await q.lease("w1", ttl=TTL)
    await backend.age(PAST_TTL)
    (first,) = await q.reap()
    assert (first.status, first.attempt) == ("queued", 2)
    (second_lease,) = await q.lease("w2", ttl=TTL)
    assert second_lease.attempt == 2 and second_lease.max_attempts == 2
    await backend.age(PAST_TTL)
    (final,) = await q.reap()
    assert (final.status, final.attempt, final.max_attempts) == ("failed", 2, 2)
    assert (final.execution_id, final.action_id) == ("e1", "e1:a0")
    assert (await q.get("e1:job0")).status == "failed"
    assert await q.lease("w3") == []
    assert await q.complete([second_lease]) == set()


async def test_heartbeat_extends_the_lease(backend):
    q = backend.queue
    await q.enqueue(jobs(2))
    leases = await q.lease("w1", limit=2, ttl=TTL)
    assert await q.heartbeat(leases, ttl=60) == {"e1:job0", "e1:job1"}
    await backend.age(PAST_TTL)
    assert await q.reap() == []
    assert await q.complete(leases) == {"e1:job0", "e1:job1"}
    assert await q.heartbeat(leases) == set()  # finished jobs are no longer held


async def test_release_returns_jobs_without_spending_an_attempt(backend):
    q = backend.queue
    await q.enqueue(jobs(3))
    leases = await q.lease("w1", limit=3)
    assert await q.release(leases[:2]) == {"e1:job0", "e1:job1"}
    again = await q.lease("w2", limit=5)
    assert [(x.job_id, x.attempt) for x in again] == [("e1:job0", 1), ("e1:job1", 1)]
    assert await q.complete(leases[:2]) == set()  # released leases are stale
    assert await q.complete(again + leases[2:]) == {"e1:job0", "e1:job1", "e1:job2"}


async def test_failed_completion_and_cancel(backend):
    q = backend.queue
    await q.enqueue(jobs(3) + jobs(1, execution="other"))
    a, b = await q.lease("w1", limit=2)
    assert await q.complete([a], status="failed", error="cannot decode") == {"e1:job0"}
    state = await q.get("e1:job0")
    assert state.status == "failed" and state.error == "cannot decode"
    assert await q.cancel_execution("e1") == {"e1:job1", "e1:job2"}
    assert await q.heartbeat([b]) == set()  # the holder learns on its next heartbeat
    assert await q.complete([b]) == set()
    assert [x.job_id for x in await q.lease("w2", limit=5)] == ["other:job0"]


async def test_cancel_jobs_by_id(backend):
    q = backend.queue
    await q.enqueue(jobs(4))
    [a] = await q.lease("w1", limit=1)
    assert await q.cancel_jobs(["e1:job0", "e1:job2", "e1:nothing"]) == {"e1:job0", "e1:job2"}
    assert await q.cancel_jobs(["e1:job0"]) == set()  # already cancelled
    assert await q.heartbeat([a]) == set()  # the holder learns on its next heartbeat
    assert await q.complete([a]) == set()
    assert [x.job_id for x in await q.lease("w2", limit=5)] == ["e1:job1", "e1:job3"]
    assert (await q.get("e1:job2")).status == "cancelled"


async def test_delayed_jobs_are_not_leased_early(backend):
    q = backend.queue
    await q.enqueue(jobs(1, delay=3600.0))
    assert await q.lease("w1") == []
    assert (await q.get("e1:job0")).status == "queued"


async def test_wait_for_work_wakes_up_for_a_delayed_job(backend):
    q = backend.queue
    await q.enqueue(jobs(1, pool="later", delay=0.3))
    # No notification comes when the delay ends; the wait is shortened to it instead.
    assert await asyncio.wait_for(q.wait_for_work("later", timeout=60), 15) is True
    await backend.age(0.5)
    assert len(await q.lease("w1", pool="later")) == 1


async def test_wait_for_work_returns_at_once_when_work_is_there(backend):
    q = backend.queue
    await q.enqueue(jobs(1, pool="ready"))
    assert await asyncio.wait_for(q.wait_for_work("ready", timeout=30), 10) is True


async def test_wait_for_work_times_out_without_work(backend):
    # The polling fallback: nothing arrives, the wait ends after its timeout.
    assert await asyncio.wait_for(backend.queue.wait_for_work("idle", timeout=0.05), 10) is False


async def test_enqueue_wakes_a_waiting_consumer(backend):
    q = backend.queue
    pool = f"wake-{uuid.uuid4().hex[:6]}"
    waiter = asyncio.create_task(q.wait_for_work(pool, timeout=60))
    await asyncio.sleep(0.2)  # let the waiter block
    assert not waiter.done()
    await q.enqueue(jobs(1, pool=pool))
    # Far below the 60 s poll timeout: the wake-up came from the notification.
    assert await asyncio.wait_for(waiter, 15) is True
    assert len(await q.lease("w1", pool=pool)) == 1


async def test_release_wakes_a_waiting_consumer(backend):
    q = backend.queue
    pool = f"rel-{uuid.uuid4().hex[:6]}"  # no other schema's notification names this pool
    await q.enqueue(jobs(1, pool=pool))
    leases = await q.lease("w1", pool=pool)
    waiter = asyncio.create_task(q.wait_for_work(pool, timeout=60))
    await asyncio.sleep(0.2)
    assert not waiter.done()
    await q.release(leases)
    assert await asyncio.wait_for(waiter, 15) is True
