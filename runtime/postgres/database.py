"""One handle on a noetl PostgreSQL database: the pool, the listener, and the objects on them.

    db = await Database.open("postgresql://postgres@127.0.0.1:5432/noetl")
    leases = await db.queue.lease("worker-1", limit=10)
    ...
    await db.close()

`open` checks that the schema is exactly what this release expects (NOE808 asks for
`noetl-vm db upgrade`), so servers and workers never run against a half-migrated database.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from noetlc.runtime.postgres.blocking_results import BlockingResults
from noetlc.runtime.postgres.connect import PgUrl, connect, connection_error, create_pool, parse_url
from noetlc.runtime.postgres.eventlog import PostgresEventLog, PostgresResultStore
from noetlc.runtime.postgres.logs import PostgresTaskLogs
from noetlc.runtime.postgres.migrate import require_current
from noetlc.runtime.postgres.notify import Notifications
from noetlc.runtime.postgres.queue import PostgresJobQueue, PostgresOwnership


@dataclass(slots=True)
class Database:
    url: PgUrl
    pool: asyncpg.Pool
    notifications: Notifications
    queue: PostgresJobQueue
    owners: PostgresOwnership
    events: PostgresEventLog
    results: PostgresResultStore
    logs: PostgresTaskLogs

    @classmethod
    async def open(
        cls, url: str | PgUrl, *, min_size: int = 1, max_size: int = 10, check_schema: bool = True
    ) -> Database:
        parsed = parse_url(url) if isinstance(url, str) else url
        if check_schema:
            conn = await connect(parsed)
            try:
                await require_current(conn, parsed.schema)
            except asyncpg.PostgresError as exc:
                raise connection_error(parsed, exc) from None
            finally:
                await conn.close()
        notes = Notifications(parsed)
        pool = await create_pool(
            parsed, min_size=min_size, max_size=max_size, init=notes.own, keep_session=True
        )
        return cls(
            parsed,
            pool,
            notes,
            PostgresJobQueue(pool, parsed, notes),
            PostgresOwnership(pool, parsed, notes),
            PostgresEventLog(pool, parsed, notes),
            PostgresResultStore(pool, parsed),
            PostgresTaskLogs(pool, parsed),
        )

    def result_store(self) -> BlockingResults:
        """Reference-first results for synchronous callers (templates, the pipeline VM, tool
        threads): a private loop thread with its own small pool, opened on first use."""
        return BlockingResults(self.url, _open_for_results)

    async def close(self) -> None:
        await self.notifications.close()
        await self.pool.close()


async def _open_for_results(url: PgUrl) -> Database:
    return await Database.open(url, max_size=2, check_schema=False)
