"""Backends for the shared contract suite: each test runs once per implementation.

Queues and ownership: memory (with a fake clock, so "wait for a lease to expire" is instant)
and PostgreSQL (a session schema on $NOETLC_TEST_PG_DSN, emptied before each test; real
time). Event and result stores: memory, SQLite and PostgreSQL (see test_contract_store.py).
A PostgreSQL backend skips with the reason when the server is unreachable, and fails under
CI=true.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from noetlc.runtime.memory_queue import MemoryJobQueue, MemoryOwnership
from noetlc.runtime.postgres.testing import schema_or_skip, truncate_all


class FakeClock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@dataclass
class QueueBackend:
    name: str
    queue: Any
    owners: Any
    clock: FakeClock | None

    async def age(self, seconds: float) -> None:
        """Let `seconds` pass for the backend's lease clock."""
        if self.clock is not None:
            self.clock.now += seconds
        else:
            await asyncio.sleep(seconds)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    yield from schema_or_skip()


@pytest.fixture(params=["memory", "postgres"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[QueueBackend]:
    if request.param == "memory":
        clock = FakeClock()
        mq = MemoryJobQueue(clock)
        yield QueueBackend("memory", mq, MemoryOwnership(clock), clock)
        return
    url = request.getfixturevalue("pg_url")
    from noetlc.runtime.postgres.database import Database

    await truncate_all(url)
    db = await Database.open(url, max_size=12)
    yield QueueBackend("postgres", db.queue, db.owners, None)
    await db.close()
