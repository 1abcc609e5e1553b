"""The pool and the listener survive their server connections being killed (as in a restart)."""

from __future__ import annotations

import asyncio

import pytest

from noetlc.runtime.postgres.connect import connect, parse_url
from noetlc.runtime.postgres.database import Database
from noetlc.runtime.postgres.testing import truncate_all
from noetlc.runtime.queue import JobSpec

pytestmark = pytest.mark.postgres


async def _kill(url: str, pids: list[int]) -> None:
    conn = await connect(url)
    try:
        await conn.execute("SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) pid", pids)
    finally:
        await conn.close()


async def test_operations_continue_after_backends_are_terminated(pg_url):
    await truncate_all(pg_url)
    db = await Database.open(pg_url, min_size=2, max_size=2)
    try:
        await db.notifications.ensure_listening()
        held = [await db.pool.acquire() for _ in range(2)]
        pids = [c.get_server_pid() for c in held]
        for c in held:
            await db.pool.release(c)
        assert db.notifications._conn is not None
        pids.append(db.notifications._conn.get_server_pid())
        await _kill(pg_url, pids)
        await asyncio.sleep(0.2)
        # Idempotent operations retry on new connections.
        assert await db.queue.enqueue([JobSpec("j1", "e1", "a1", {})]) == 1
        (lease,) = await db.queue.lease("w1")
        assert await db.queue.complete([lease]) == {"j1"}
        # The listener reconnects on the next wait, and wake-ups work again.
        waiter = asyncio.create_task(db.queue.wait_for_work("after", timeout=60))
        await asyncio.sleep(0.3)
        assert db.notifications.listening
        await db.queue.enqueue([JobSpec("j2", "e1", "a2", {}, pool="after")])
        assert await asyncio.wait_for(waiter, 15) is True
    finally:
        await db.close()


async def test_the_url_names_the_connections_in_pg_stat_activity(pg_url):
    # the tests that terminate backends pick their own cluster's connections by this name;
    # asyncpg lets our startup settings override the DSN's, so the URL's name must be kept
    assert parse_url(pg_url).application_name == "noetl"
    named = f"{pg_url}&application_name=noetl_test_named"
    conn = await connect(named)
    try:
        assert await conn.fetchval("SELECT current_setting('application_name')") == (
            "noetl_test_named"
        )
    finally:
        await conn.close()
    db = await Database.open(named, min_size=1, max_size=1)
    try:
        await db.notifications.ensure_listening()
        async with db.pool.acquire() as pooled:
            names = await pooled.fetch(
                "SELECT application_name FROM pg_stat_activity WHERE pid = ANY($1::int[])",
                [pooled.get_server_pid(), db.notifications._conn.get_server_pid()],
            )
        assert [r["application_name"] for r in names] == ["noetl_test_named"] * 2
    finally:
        await db.close()
