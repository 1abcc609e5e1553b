"""LISTEN/NOTIFY wake-ups on one dedicated connection, with polling as the fallback.

Channels: `noetl_jobs` (payload: the pool that got leasable jobs), `noetl_executions`
(executions became claimable), `noetl_events` (payload: the execution that got events a server
reads) and `noetl_progress` (the execution that got events no server reads: a task started).
A process listens only to the channels it waits on (`ensure_listening(*channels)`): every
notification a backend forwards wakes the process it serves, so a worker does not hear the
event log's and a server not the queue's. A waiter registers for (channel, key) and sleeps until a matching notification arrives or its
timeout passes; when the listening connection is down (PostgreSQL restarted), waiters simply
sleep their timeout — the caller polls — and the next wait reconnects. Notifications are a
hint, never a source of truth: callers always query after waking up.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import asyncpg

from noetlc.runtime.backend import EVENTS, EXECUTIONS, JOBS, PROGRESS, Waiters
from noetlc.runtime.postgres.connect import PgUrl, connect
from noetlc.runtime.postgres.errors import DatabaseError

CHANNELS = (JOBS, EXECUTIONS, EVENTS, PROGRESS)


class Notifications(Waiters):
    def __init__(self, url: PgUrl) -> None:
        super().__init__()
        self._url = url
        self._conn: asyncpg.Connection | None = None
        self._channels: set[str] = set()  # listened to (again after a reconnection)
        # a worker's own wake-up channel -> the channel its notifications wake (`noetl_jobs`)
        self._aliases: dict[str, str] = {}
        self._connecting = asyncio.Lock()
        # notifications seen, by channel (tests and diagnostics)
        self.received: Counter[str] = Counter()
        # backends of this process's pool: with `ignore_own`, their notifications wake nobody
        # here (a server need not wake up for the events it appended itself)
        self.own_pids: set[int] = set()
        self.ignore_own = False

    @property
    def listening(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def ensure_listening(self, *channels: str) -> bool:
        """Connect and LISTEN to `channels` (none: every channel) if not yet (or no longer)
        listening, and to the channels listened to before; False when unreachable."""
        wanted = set(channels or CHANNELS)
        if self.listening and wanted <= self._channels:
            return True
        async with self._connecting:
            conn = self._conn if self.listening else None
            try:
                if conn is None:
                    self._conn = None
                    conn = await connect(self._url)
                    for channel in sorted(self._channels):
                        await conn.add_listener(channel, self._on_notify)
                for channel in sorted(wanted - self._channels):
                    await conn.add_listener(channel, self._on_notify)
                    self._channels.add(channel)
            except (DatabaseError, asyncpg.PostgresError, OSError):
                if conn is not None and not conn.is_closed():
                    conn.terminate()
                self._conn = None
                return False
            self._conn = conn
            return True

    async def listen_as(self, channel: str, alias: str) -> bool:
        """Listen to `channel` and wake its notifications' waiters as `alias`'s (a worker's
        own wake-up channel, whose notifications are the pool's `noetl_jobs`)."""
        self._aliases[channel] = alias
        return await self.ensure_listening(channel)

    async def own(self, conn: asyncpg.Connection) -> None:
        """The pool's `init`: remember the backend of each of our connections."""
        self.own_pids.add(conn.get_server_pid())

    def _on_notify(self, _conn: Any, pid: int, channel: str, payload: str) -> None:
        self.received[channel] += 1
        if self.ignore_own and pid in self.own_pids:
            return
        self.wake(self._aliases.get(channel, channel), payload)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            try:
                await conn.close(timeout=2.0)
            except (TimeoutError, asyncpg.PostgresError, OSError):
                conn.terminate()
