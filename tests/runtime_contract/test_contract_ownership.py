"""The execution-ownership contract (runtime/queue.py's ExecutionOwnership), per backend."""

from __future__ import annotations

import asyncio
from collections import Counter

TTL = 0.4
PAST_TTL = 0.6


async def test_offer_is_idempotent_and_claim_takes_the_oldest(backend):
    o = backend.owners
    assert await o.offer(["x1", "x2", "x3"]) == 3
    assert await o.offer(["x1", "x4"]) == 1
    first = await o.claim("s1", limit=2)
    assert [c.execution_id for c in first] == ["x1", "x2"]
    assert all(c.owner == "s1" and c.epoch == 1 for c in first)
    rest = await o.claim("s2", limit=10)
    assert [c.execution_id for c in rest] == ["x3", "x4"]
    assert await o.claim("s3") == []
    assert (await o.owner_of("x1")).owner == "s1"
    assert await o.owner_of("unknown") is None


async def test_an_expired_owner_is_replaced_and_learns_it_on_renew(backend):
    o = backend.owners
    await o.offer(["x1"])
    mine = await o.acquire("x1", "s1", ttl=TTL)
    assert mine is not None and mine.epoch == 1
    assert await o.acquire("x1", "s2") is None  # live lease: no stealing
    again = await o.acquire("x1", "s1", ttl=TTL)
    assert again is not None and again.epoch == 1  # re-acquiring our own lease keeps the epoch
    await backend.age(PAST_TTL)
    assert await o.owner_of("x1") is None  # expired
    stolen = await o.acquire("x1", "s2", ttl=60)
    assert stolen is not None and (stolen.owner, stolen.epoch) == ("s2", 2)
    assert await o.renew("s1", ["x1"]) == set()
    assert await o.renew("s2", ["x1"], ttl=60) == {"x1"}
    assert await o.retire("s1", "x1") is False


async def test_claim_steals_expired_executions(backend):
    o = backend.owners
    await o.offer(["x1", "x2"])
    await o.claim("dead-server", limit=2, ttl=TTL)
    assert await o.claim("s2") == []
    await backend.age(PAST_TTL)
    taken = await o.claim("s2", limit=5, ttl=60)
    assert sorted((c.execution_id, c.epoch) for c in taken) == [("x1", 2), ("x2", 2)]


async def test_renew_keeps_a_lease_alive(backend):
    o = backend.owners
    await o.offer(["x1"])
    await o.claim("s1", ttl=TTL)
    assert await o.renew("s1", ["x1", "not-mine"], ttl=60) == {"x1"}
    await backend.age(PAST_TTL)
    assert await o.claim("s2") == []
    assert (await o.owner_of("x1")).owner == "s1"


async def test_release_and_retire(backend):
    o = backend.owners
    await o.offer(["x1", "x2"])
    await o.claim("s1", limit=2, ttl=60)
    assert await o.release("s2", ["x1"]) == set()  # not the owner
    assert await o.release("s1", ["x1"]) == {"x1"}
    assert [c.execution_id for c in await o.claim("s2", ttl=60)] == ["x1"]
    assert await o.retire("s2", "x2") is False
    assert await o.retire("s1", "x2") is True
    assert await o.owner_of("x2") is None
    assert await o.claim("s3") == []  # a retired execution is never claimed again


async def test_concurrent_servers_claim_each_execution_once(backend):
    o = backend.owners
    ids = [f"x{i:03d}" for i in range(60)]
    await o.offer(ids)
    claimed: Counter[str] = Counter()

    async def server(name: str) -> None:
        while batch := await o.claim(name, limit=4, ttl=60):
            claimed.update(c.execution_id for c in batch)
            await asyncio.sleep(0)

    await asyncio.wait_for(asyncio.gather(*(server(f"s{i}") for i in range(4))), 60)
    assert sorted(claimed) == ids and set(claimed.values()) == {1}


async def test_offer_wakes_a_waiting_server(backend):
    o = backend.owners
    assert await asyncio.wait_for(o.wait_for_offers(timeout=0.05), 10) is False
    # NOTIFY channels are per database, not per schema: another installation (or test run) in
    # the same database may wake the waiter (a hint, never a fact). Wait until one waiter
    # stays asleep, then offer.
    for _ in range(50):
        waiter = asyncio.create_task(o.wait_for_offers(timeout=60))
        await asyncio.sleep(0.2)
        if not waiter.done():
            break
        assert await waiter is True  # woken by someone else's notification
    assert not waiter.done()
    await o.offer(["x1"])
    assert await asyncio.wait_for(waiter, 15) is True
