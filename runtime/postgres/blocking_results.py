"""The PostgreSQL result store behind the synchronous `put_result`/`get_result` that
`References` (runtime/results.py) calls: template evaluation and the pipeline VM are
synchronous, on a server's or worker's event loop thread or in a worker's tool thread.

The queries run on a private event loop thread with its own small pool (an asyncpg pool
belongs to one loop), so a caller on the main loop blocks without deadlocking it. The
thread and pool start on first use: executions without large results cost nothing. Recently
stored or read payloads are kept (up to `cache_bytes`), so a worker that stored a result, or a
server resolving one arc after another, reads it once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from noetlc.runtime.postgres.connect import PgUrl
from noetlc.runtime.postgres.eventlog import PostgresResultStore

T = TypeVar("T")


class _Results(Protocol):
    """The part of a `Database` the result store uses."""

    results: PostgresResultStore

    async def close(self) -> None: ...


# opens the private pool's database (postgres/database.py `Database.open`)
Opener = Callable[[PgUrl], Awaitable[_Results]]


class BlockingResults:
    def __init__(self, url: PgUrl, opener: Opener, cache_bytes: int = 64 * 1024 * 1024) -> None:
        self.url = url
        self.opener = opener
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cached = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._db: _Results | None = None

    def put_result(self, key: str, data: bytes, execution_id: str | None = None) -> None:
        self._call(self._database_then(lambda db: db.results.put(key, data, execution_id)))
        self._remember(key, data)

    def get_result(self, key: str) -> bytes | None:
        with self._lock:
            data = self._cache.get(key)
            if data is not None:
                self._cache.move_to_end(key)
                return data
        data = self._call(self._database_then(lambda db: db.results.get(key)))
        if data is not None:
            self._remember(key, data)
        return data

    def close(self) -> None:
        with self._lock:
            loop, thread, db = self._loop, self._thread, self._db
            self._loop = self._thread = self._db = None
        if loop is None or thread is None:
            return
        if db is not None:
            # closing on the way out: a failure leaves nothing behind the process needs
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(db.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)

    # ------------------------------------------------------------------ internals

    def _remember(self, key: str, data: bytes) -> None:
        if len(data) > self.cache_bytes:
            return
        with self._lock:
            if key in self._cache:
                return
            self._cache[key] = data
            self._cached += len(data)
            while self._cached > self.cache_bytes:
                _, dropped = self._cache.popitem(last=False)
                self._cached -= len(dropped)

    async def _database_then(self, use: Callable[[_Results], Awaitable[T]]) -> T:
        if self._db is None:
            self._db = await self.opener(self.url)
        return await use(self._db)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="noetl-results", daemon=True
                )
                self._thread.start()
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()
