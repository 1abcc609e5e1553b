"""Task logs in PostgreSQL (`task_logs`, migration 0007): what workers' tasks printed."""

from __future__ import annotations

from typing import Any

import asyncpg

from noetlc.runtime.event_store import LOG_COLUMNS
from noetlc.runtime.postgres.connect import PgUrl, with_retry
from noetlc.runtime.postgres.queries import q


class PostgresTaskLogs:
    def __init__(self, pool: asyncpg.Pool, url: PgUrl) -> None:
        self._pool = pool
        self._url = url

    async def append(self, execution_id: str, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        columns = [[r.get(c) for r in rows] for c in LOG_COLUMNS]

        async def run() -> None:
            async with self._pool.acquire() as conn:
                await conn.execute(q("append_task_logs"), execution_id, *columns)

        await with_retry(self._url, run)

    async def read(
        self,
        execution_id: str,
        after: int = 0,
        step: str | None = None,
        iteration: int | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        async def run() -> list[asyncpg.Record]:
            async with self._pool.acquire() as conn:
                return list(
                    await conn.fetch(
                        q("read_task_logs"), execution_id, after, step, iteration, limit
                    )
                )

        return [dict(r) for r in await with_retry(self._url, run)]
