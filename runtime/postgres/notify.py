"""LISTEN/NOTIFY wake-ups on one dedicated connection, with polling as the fallback.

Channels: `noetl_jobs` (payload: the pool that got leasable jobs), `noetl_executions`
(executions became claimable) and `noetl_events` (payload: the execution that got events).
A waiter registers for (channel, key) and sleeps until a matching notification arrives or its
timeout passes; when the listening connection is down (PostgreSQL restarted), waiters simply
sleep their timeout — the caller polls — and the next wait reconnects. Notifications are a
hint, never a source of truth: callers always query after waking up.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from noetlc.runtime.backend import EVENTS, EXECUTIONS, JOBS, Waiters
from noetlc.runtime.postgres.connect import PgUrl, connect
from noetlc.runtime.postgres.errors import DatabaseError

CHANNELS = (JOBS, EXECUTIONS, EVENTS)


class Notifications(Waiters):
    def __init__(self, url: PgUrl) -> None:
        super().__init__()
        self._url = url
        self._conn: asyncpg.Connection | None = None
        self._connecting = asyncio.Lock()
        self.received = 0  # notifications seen (tests and diagnostics)
        # backends of this process's pool: with `ignore_own`, their notifications wake nobody
        # here (a server need not wake up for the events it appended itself)
        self.own_pids: set[int] = set()
        self.ignore_own = False

    @property
    def listening(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def ensure_listening(self) -> bool:
        """Connect and LISTEN if not yet (or no longer) listening; False when unreachable."""
        if self.listening:
            return True
        async with self._connecting:
            if self.listening:
                return True
            try:
                conn = await connect(self._url)
                for channel in CHANNELS:
                    await conn.add_listener(channel, self._on_notify)
            except (DatabaseError, asyncpg.PostgresError, OSError):
                self._conn = None
                return False
            self._conn = conn
            return True

    async def own(self, conn: asyncpg.Connection) -> None:
        """The pool's `init`: remember the backend of each of our connections."""
        self.own_pids.add(conn.get_server_pid())

    def _on_notify(self, _conn: Any, pid: int, channel: str, payload: str) -> None:
        self.received += 1
        if self.ignore_own and pid in self.own_pids:
            return
        self.wake(channel, payload)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                await conn.close(timeout=2.0)
            except (TimeoutError, asyncpg.PostgresError, OSError):
                conn.terminate()
