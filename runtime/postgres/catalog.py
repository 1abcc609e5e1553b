"""The service tables (catalog, credentials, credential reads, variables) in the PostgreSQL
database of distributed mode, behind the synchronous `CatalogStore` interface
(runtime/catalog.py's `CatalogTables` does the work over `_fetch`/`_execute`): each call runs
on a private event loop thread with a small pool.

Registering serializes per path with a transaction advisory lock, so API processes running at
the same time never hand out one version twice.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import asyncpg

from noetlc.runtime.catalog import CatalogTables
from noetlc.runtime.event_store import StoreError
from noetlc.runtime.ids import snowflake
from noetlc.runtime.postgres.connect import PgUrl, connect, create_pool, parse_url
from noetlc.runtime.postgres.errors import DatabaseError
from noetlc.runtime.postgres.migrate import require_current
from noetlc.runtime.postgres.queries import q

T = TypeVar("T")


class PostgresCatalog(CatalogTables):
    def __init__(self, url: str | PgUrl) -> None:
        self.url = parse_url(url) if isinstance(url, str) else url
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        try:
            self._pool: asyncpg.Pool = self._call(self._open)
        except DatabaseError as exc:
            self._stop()
            raise StoreError(exc.code, str(exc), exc.hint) from None

    async def _open(self) -> asyncpg.Pool:
        conn = await connect(self.url)
        try:
            await require_current(conn, self.url.schema)
        finally:
            await conn.close()
        return await create_pool(self.url, min_size=1, max_size=4)

    def _call(self, make: Callable[[], Awaitable[T]]) -> T:
        async def run() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    # the parameters bind by position ($1, $2, ...): the callers pass them in that order
    def _fetch(self, query: str, /, **params: Any) -> list[Sequence[Any]]:
        rows = self._call(lambda: self._pool.fetch(q(query), *params.values()))
        return [tuple(r) for r in rows]

    def _execute(self, query: str, /, **params: Any) -> int:
        status: str = self._call(lambda: self._pool.execute(q(query), *params.values()))
        return int(status.rsplit(" ", 1)[-1]) if status[-1:].isdigit() else 0

    def _insert_version(
        self, path: str, key: str, row: Callable[[str, int], dict[str, Any]]
    ) -> tuple[str, bool]:
        async def run() -> tuple[str, bool]:
            async with self._pool.acquire() as conn, conn.transaction():
                # Versions of one path are assigned under a transaction advisory lock.
                await conn.execute(q("catalog_lock_path"), path)
                same = await conn.fetchval(q("catalog_same_content"), path, key)
                if same is not None:
                    return str(same), False
                version = await conn.fetchval(q("catalog_next_version"), path)
                catalog_id = snowflake()
                await conn.execute(q("catalog_insert"), *row(catalog_id, version).values())
                return catalog_id, True

        return self._call(run)

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def close(self) -> None:
        try:
            self._call(self._pool.close)
        finally:
            self._stop()
