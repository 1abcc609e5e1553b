"""The job queue and execution ownership on PostgreSQL (runtime/queue.py's interfaces).

Every operation is one statement from sql/queue.sql or sql/owners.sql, batched over arrays
(`unnest`), so a worker leasing or completing ten jobs pays one round trip. Leasing is
`FOR UPDATE SKIP LOCKED` over a partial index of queued jobs, per pool. Operations that are
safe to repeat are retried on a fresh connection when the connection is lost (a restarted
server); `lease` is not — a lease whose answer was lost just expires and is re-queued.
`round()` is the worker's transaction: several picks (row locks, no lease), the lease of the
picked jobs that run in threads, and one `finish` (complete + append the events, migration
0002) under one commit. `finish_and_lease` is a round of one statement in autocommit (a
worker whose jobs run in threads), `append_fenced` one statement too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from noetlc.runtime.backend import ANY_KEY, EXECUTIONS, JOBS, Completion
from noetlc.runtime.event_store import encode_payload as encode_json
from noetlc.runtime.postgres.arrays import text_array
from noetlc.runtime.postgres.connect import PgUrl, with_retry
from noetlc.runtime.postgres.eventlog import completion_columns, event_columns
from noetlc.runtime.postgres.notify import Notifications
from noetlc.runtime.postgres.queries import q
from noetlc.runtime.queue import (
    DEFAULT_POOL,
    FinalStatus,
    JobSpec,
    JobState,
    Lease,
    Ownership,
    ReapedJob,
)
from noetlc.vm.protocol import Event

_NEXT_READY = """
SELECT CASE
         WHEN EXISTS (SELECT 1 FROM jobs WHERE status = 'queued' AND pool = $1
                                         AND available_at <= now()) THEN 0.0
         ELSE (SELECT extract(epoch FROM min(available_at) - now())::float8
                 FROM jobs WHERE status = 'queued' AND pool = $1)
       END
"""
_CLAIMABLE = """
SELECT EXISTS (SELECT 1 FROM execution_owners WHERE owner IS NULL OR lease_expires_at < now())
"""


def _tokens(leases: Sequence[Lease]) -> tuple[list[str], list[str]]:
    return [lease.job_id for lease in leases], [lease.lease_id for lease in leases]


def _leases(rows: list[asyncpg.Record]) -> list[Lease]:
    return [
        _lease(r, r["lease_owner"], r["lease_id"], r["lease_expires_at"])
        for r in sorted(rows, key=lambda r: r["queue_seq"])
    ]


def _lease(r: asyncpg.Record, owner: str, lease_id: str, expires_at: float) -> Lease:
    return Lease(
        r["job_id"],
        r["execution_id"],
        r["action_id"],
        r["pool"],
        json.loads(r["payload"]),
        r["attempt"],
        r["max_attempts"],
        owner,
        lease_id,
        expires_at,
    )


class PostgresJobQueue:
    def __init__(self, pool: asyncpg.Pool, url: PgUrl, notifications: Notifications) -> None:
        self._pool = pool
        self._url = url
        self._notes = notifications

    async def _fetch(self, query: str, *args: Any, retry: bool = True) -> list[asyncpg.Record]:
        async def run() -> list[asyncpg.Record]:
            async with self._pool.acquire() as conn:
                return list(await conn.fetch(query, *args))

        if retry:
            return await with_retry(self._url, run)
        return await run()

    async def enqueue(self, jobs: Sequence[JobSpec]) -> int:
        if not jobs:
            return 0
        rows = await self._fetch(
            q("enqueue_jobs"),
            [j.job_id for j in jobs],
            [j.execution_id for j in jobs],
            [j.action_id for j in jobs],
            [j.pool for j in jobs],
            [encode_json(j.payload) for j in jobs],
            [j.max_attempts for j in jobs],
            [float(j.delay) for j in jobs],
        )
        return int(rows[0]["inserted"])

    async def lease(
        self, owner: str, *, pool: str = DEFAULT_POOL, limit: int = 1, ttl: float = 30.0
    ) -> list[Lease]:
        rows = await self._fetch(q("lease_jobs"), pool, limit, owner, float(ttl), retry=False)
        return _leases(rows)

    async def complete_and_lease(
        self,
        done: Sequence[Lease],
        owner: str,
        *,
        pool: str = DEFAULT_POOL,
        limit: int = 1,
        ttl: float = 30.0,
    ) -> tuple[set[str], list[Lease]]:
        rows = await self._fetch(
            q("complete_and_lease_jobs"),
            *_tokens(done),
            pool,
            limit,
            owner,
            float(ttl),
            retry=False,
        )
        return _finished(rows)

    async def finish_and_lease(
        self,
        done: Sequence[Completion],
        owner: str,
        *,
        pool: str = DEFAULT_POOL,
        limit: int = 1,
        ttl: float = 30.0,
        idle: float = 0.0,
    ) -> tuple[set[str], list[Lease]]:
        """A round without a transaction: complete `done` (fenced, with their events) and
        lease up to `limit` jobs in one statement, sent in autocommit — one statement and
        one commit where a round transaction costs BEGIN, a pick, a lease, the finish and
        COMMIT. Not retried: a lease whose answer was lost expires and is re-queued, and a
        completion whose answer was lost is refused when sent again (the job is done).
        `idle` > 0: if nothing is leased, the worker is registered as waiting (`waiter`);
        nothing to finish or lease: only a registration is withdrawn (a worker stopping)."""
        channel = await self.waiter(owner) if idle > 0 else None
        rows = await self._fetch(
            q("finish_and_lease_jobs"),
            *_finish_args(done, [], owner, pool, limit, ttl, channel, idle),
            retry=False,
        )
        return _finished(rows)

    async def waiter(self, owner: str) -> str | None:
        """`owner`'s own wake-up channel, listened to (its notifications wake the waiters
        of `noetl_jobs`): a worker that sleeps for want of jobs registers it in the statement
        that found none (`finish_and_lease_jobs`), and an enqueue wakes one registered worker
        per job instead of every listener of the pool (0011). None when the listening
        connection is down: the worker does not register, the pool's channel still wakes it."""
        channel = "noetl_w_" + hashlib.sha1(owner.encode()).hexdigest()[:24]
        return channel if await self._notes.listen_as(channel, JOBS) else None

    @asynccontextmanager
    async def round(
        self, owner: str, *, pool: str = DEFAULT_POOL, ttl: float = 30.0
    ) -> AsyncIterator[WorkerRound]:
        """One transaction of a worker's round on one connection: `pick`s, `lease_picked`,
        then `finish`; committed at the end (one WAL flush for the whole batch), rolled back
        on an error — the jobs picked or leased in it go back to the queue, nothing was
        finished."""
        async with self._pool.acquire() as conn, conn.transaction():
            yield WorkerRound(conn, owner, pool, ttl, self)

    async def complete(
        self, leases: Sequence[Lease], *, status: FinalStatus = "done", error: str | None = None
    ) -> set[str]:
        if not leases:
            return set()
        rows = await self._fetch(q("complete_jobs"), *_tokens(leases), status, error)
        return {r["job_id"] for r in rows}

    async def append_fenced(self, lease: Lease, events: Sequence[Event]) -> bool:
        """Append events of a job still running, only while `lease` is current (fencing):
        False, and nothing appended, when it is not."""

        _, *columns = event_columns({lease.execution_id: events})

        async def run() -> bool:
            # one statement in autocommit: the lease check and the append (queue.sql)
            async with self._pool.acquire() as conn:
                row = await conn.fetchrow(
                    q("append_fenced"), lease.execution_id, *columns, lease.job_id, lease.lease_id
                )
            return bool(row and row["held"])

        return await with_retry(self._url, run)

    async def heartbeat(self, leases: Sequence[Lease], *, ttl: float = 30.0) -> set[str]:
        if not leases:
            return set()
        rows = await self._fetch(q("heartbeat_jobs"), *_tokens(leases), float(ttl))
        return {r["job_id"] for r in rows}

    async def release(self, leases: Sequence[Lease]) -> set[str]:
        if not leases:
            return set()
        rows = await self._fetch(q("release_jobs"), *_tokens(leases))
        return {r["job_id"] for r in rows}

    async def reap(self, *, limit: int = 1000) -> list[ReapedJob]:
        rows = await self._fetch(q("reap_jobs"), limit)
        return [
            ReapedJob(
                r["job_id"],
                r["execution_id"],
                r["action_id"],
                r["pool"],
                r["status"],
                r["attempt"],
                r["max_attempts"],
                r["last_error"],
            )
            for r in rows
        ]

    async def cancel_execution(self, execution_id: str) -> set[str]:
        rows = await self._fetch(q("cancel_execution_jobs"), execution_id)
        return {r["job_id"] for r in rows}

    async def cancel_jobs(self, job_ids: Sequence[str]) -> set[str]:
        if not job_ids:
            return set()
        for attempt in range(1, 4):
            try:
                rows = await self._fetch(q("cancel_jobs"), list(job_ids))
                break
            except asyncpg.DeadlockDetectedError:
                # a worker's round held a job it picked that we wanted; it rolled back or
                # we did: try again (cancelling is idempotent)
                if attempt == 3:
                    raise
        return {r["job_id"] for r in rows}

    async def wait_for_work(self, pool: str = DEFAULT_POOL, timeout: float = 1.0) -> bool:
        await self._notes.ensure_listening(JOBS)
        event = self._notes.register(JOBS, pool)
        try:
            # Checked after registering: a job enqueued in between still wakes us.
            rows = await self._fetch(_NEXT_READY, pool)
            next_ready = rows[0][0]
            if next_ready is not None and next_ready <= 0:
                return True
            if next_ready is not None:
                # A delayed job becomes leasable without a notification: wake up for it.
                if await self._notes.sleep_on(event, min(timeout, next_ready)):
                    return True
                return bool(next_ready <= timeout)
            return await self._notes.sleep_on(event, timeout)
        finally:
            self._notes.unregister(JOBS, pool, event)

    async def get(self, job_id: str) -> JobState | None:
        rows = await self._fetch(q("get_job"), job_id)
        return _state(rows[0]) if rows else None

    async def get_many(self, job_ids: Sequence[str]) -> list[JobState]:
        if not job_ids:
            return []
        return [_state(r) for r in await self._fetch(q("get_jobs"), list(job_ids))]

    async def close(self) -> None:
        """The pool and the listener belong to the `Database` that made this queue."""


def _state(r: asyncpg.Record) -> JobState:
    return JobState(
        r["job_id"],
        r["execution_id"],
        r["action_id"],
        r["pool"],
        json.loads(r["payload"]),
        r["status"],
        r["attempt"],
        r["max_attempts"],
        r["lease_owner"],
        r["lease_id"],
        r["last_error"],
    )


class WorkerRound:
    """The statements of a worker's round transaction (see `PostgresJobQueue.round`)."""

    __slots__ = ("_after", "_conn", "_queue", "owner", "pool", "ttl")

    def __init__(
        self, conn: asyncpg.Connection, owner: str, pool: str, ttl: float, queue: PostgresJobQueue
    ) -> None:
        self._conn = conn
        self._queue = queue
        # the last queue_seq picked: our own row locks do not make SKIP LOCKED skip them
        self._after = 0
        self.owner = owner
        self.pool = pool
        self.ttl = ttl

    async def pick(self, limit: int) -> list[Lease]:
        """Up to `limit` leasable jobs, row-locked by this transaction (other workers' SKIP
        LOCKED pass them by) but not leased: `finish(ran=...)` moves the ones run inline
        straight to done, `lease_picked` leases the others. Their `lease_id` is empty."""
        if limit <= 0:
            return []
        rows = await self._conn.fetch(q("pick_jobs"), self.pool, limit, self._after)
        if rows:
            self._after = rows[-1]["queue_seq"]
        return [_lease(r, self.owner, "", 0.0) for r in rows]

    async def lease_picked(self, picked: Sequence[Lease]) -> list[Lease]:
        """Lease picked jobs (those that will run outside this transaction)."""
        if not picked:
            return []
        rows = await self._conn.fetch(
            q("lease_picked_jobs"), [p.job_id for p in picked], self.owner, float(self.ttl)
        )
        return _leases(list(rows))

    async def unpick(self, picked: Sequence[Lease]) -> None:
        """Nothing to write: a picked job is only row-locked, and the lock ends with the
        transaction (this round passes it by: its picks start after the last one)."""

    async def finish(
        self, done: Sequence[Completion], ran: Sequence[Completion], idle: float = 0.0
    ) -> set[str]:
        """Complete `done` (leased jobs; current lease holders only) and `ran` (jobs picked
        and run in this transaction), and append the events of the completions accepted, in
        one statement: jobs first, the executions' counter rows last (0002). A completion
        whose lease is no longer current, or whose job was cancelled meanwhile, is refused
        with its events (0003). `idle` > 0: the worker sleeps after this round, registered
        as waiting (`PostgresJobQueue.waiter`); 0: any registration of it is withdrawn."""
        channel = await self._queue.waiter(self.owner) if idle > 0 else None
        args = _finish_args(done, ran, self.owner, self.pool, 0, 0.0, channel, idle)
        accepted, _ = _finished(await self._conn.fetch(q("finish_and_lease_jobs"), *args))
        return accepted


def _finish_args(
    done: Sequence[Completion],
    ran: Sequence[Completion],
    owner: str,
    pool: str,
    limit: int,
    ttl: float,
    channel: str | None = None,
    idle: float = 0.0,
) -> list[Any]:
    """`finish_and_lease_jobs`' parameters: the completions (leased jobs, `done`, and jobs
    picked and run in the same transaction, `ran`), their events, the lease to take, and
    the worker's wake-up channel when it will wait for jobs (for `idle` seconds)."""
    return [
        text_array([d.job_id for d, _ in done]),
        text_array([d.lease_id for d, _ in done]),
        text_array([r.job_id for r, _ in ran]),
        owner,
        *completion_columns(
            [(d.execution_id, d.job_id, d.lease_id, events) for d, events in done]
            + [(r.execution_id, r.job_id, None, events) for r, events in ran]
        ),
        pool,
        limit,
        float(ttl),
        channel,
        float(idle),
    ]


def _finished(rows: list[asyncpg.Record]) -> tuple[set[str], list[Lease]]:
    """The accepted completions and the new leases of a statement that does both
    (`complete_and_lease_jobs`, `finish_and_lease_jobs`: `was_completed` tells them apart)."""
    accepted = {r["job_id"] for r in rows if r["was_completed"]}
    return accepted, _leases([r for r in rows if not r["was_completed"]])


class PostgresOwnership:
    def __init__(self, pool: asyncpg.Pool, url: PgUrl, notifications: Notifications) -> None:
        self._pool = pool
        self._url = url
        self._notes = notifications

    async def _fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        async def run() -> list[asyncpg.Record]:
            async with self._pool.acquire() as conn:
                return list(await conn.fetch(query, *args))

        return await with_retry(self._url, run)

    async def offer(self, execution_ids: Sequence[str]) -> int:
        if not execution_ids:
            return 0
        rows = await self._fetch(q("offer_executions"), list(execution_ids))
        return int(rows[0]["offered"])

    async def claim(self, owner: str, *, limit: int = 10, ttl: float = 30.0) -> list[Ownership]:
        rows = await self._fetch(q("claim_executions"), owner, limit, float(ttl))
        return [Ownership(r["execution_id"], owner, r["epoch"], r["expires_at"]) for r in rows]

    async def acquire(
        self, execution_id: str, owner: str, *, ttl: float = 30.0
    ) -> Ownership | None:
        rows = await self._fetch(q("acquire_execution"), execution_id, owner, float(ttl))
        if not rows:
            return None
        r = rows[0]
        return Ownership(r["execution_id"], owner, r["epoch"], r["expires_at"])

    async def renew(
        self, owner: str, execution_ids: Sequence[str], *, ttl: float = 30.0
    ) -> set[str]:
        if not execution_ids:
            return set()
        rows = await self._fetch(q("renew_executions"), owner, list(execution_ids), float(ttl))
        return {r["execution_id"] for r in rows}

    async def release(self, owner: str, execution_ids: Sequence[str]) -> set[str]:
        if not execution_ids:
            return set()
        rows = await self._fetch(q("release_executions"), owner, list(execution_ids))
        return {r["execution_id"] for r in rows}

    async def retire(self, owner: str, execution_id: str) -> bool:
        return bool(await self._fetch(q("retire_execution"), execution_id, owner))

    async def owner_of(self, execution_id: str) -> Ownership | None:
        rows = await self._fetch(q("get_owner"), execution_id)
        if not rows or not rows[0]["live"]:
            return None
        r = rows[0]
        return Ownership(r["execution_id"], r["owner"], r["epoch"], r["expires_at"])

    async def wait_for_offers(self, timeout: float = 1.0) -> bool:
        await self._notes.ensure_listening(EXECUTIONS)
        event = self._notes.register(EXECUTIONS, ANY_KEY)
        try:
            rows = await self._fetch(_CLAIMABLE)
            if rows[0][0]:
                return True
            return await self._notes.sleep_on(event, timeout)
        finally:
            self._notes.unregister(EXECUTIONS, ANY_KEY, event)

    async def close(self) -> None:
        """The pool and the listener belong to the `Database` that made this object."""
