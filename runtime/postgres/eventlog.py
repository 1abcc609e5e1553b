"""The event log and the result store on PostgreSQL, as plain async operations on envelopes.

Events are the protocol's envelopes (vm/protocol.py `Event`: `event_id`, `ts`, `name`,
`source`, `step`, `step_run_id`, `task_run_id`, `iteration`, `attempt`, `parent_id`,
`action_id`, `pc`, `payload`; records, dicts with those fields, are accepted). The store assigns `seq`: several writers (a server and its workers) append to one
execution, and an append holds the execution's counter row, so `seq` is gap-free and an
event already stored (same `event_id`) is skipped without taking a number. Small batches go
through `noetl_append_events` (one round trip); batches of `COPY_THRESHOLD` events or more
are COPYed under the same lock, which is cheaper per event once the batch is large
(bench/test_bench_pg_queue.py measured both; docs/distributed.md has the figures).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import asyncpg

from noetlc.runtime.backend import EVENTS, PROGRESS, SERVER_READS
from noetlc.runtime.event_store import encode_payload as encode_json
from noetlc.runtime.postgres.arrays import (
    ENVELOPE_NUMBERS,
    column_arrays,
    envelope_arrays,
    number_array,
    text_array,
)
from noetlc.runtime.postgres.connect import PgUrl, with_retry
from noetlc.runtime.postgres.errors import DatabaseError
from noetlc.runtime.postgres.notify import Notifications
from noetlc.runtime.postgres.queries import q
from noetlc.runtime.queue import JobSpec
from noetlc.vm.protocol import ENVELOPE, TERMINAL_NAMES, Event

COPY_THRESHOLD = 64
_TEXT_FIELDS = ("name", "source", "step", "step_run_id", "task_run_id", "parent_id", "action_id")
# the envelope (vm/protocol.py) in column order: one definition for SQLite and PostgreSQL
_COLUMNS = ("execution_id", "seq", *ENVELOPE, "payload")
_NAME = ENVELOPE.index("name")  # a row's event name (rows are the envelope, then the payload)


def _text(value: Any) -> str | None:
    return value if value is None or value.__class__ is str else str(value)


def _int(value: Any) -> int | None:
    return value if value is None or value.__class__ is int else int(value)


def encode_payload(payload: Any) -> str:
    return encode_json({} if payload is None else payload)


def _row(item: Event | Mapping[str, Any]) -> tuple[Any, ...]:
    """An envelope as the column values after (execution_id, seq): the worker's hot path,
    hence spelled out field by field."""
    event = Event.from_record(item)
    return (
        str(event.event_id),
        float(event.ts or time.time()),
        _text(event.name),
        _text(event.source),
        _text(event.step),
        _text(event.step_run_id),
        _text(event.task_run_id),
        _int(event.iteration),
        _int(event.attempt),
        _text(event.parent_id),
        _text(event.action_id),
        _int(event.pc),
        encode_json({} if (payload := event.payload) is None else payload),
    )


def event_columns(
    events_by_execution: Mapping[str, Sequence[Event | Mapping[str, Any]]],
) -> list[str]:
    """The 14 parallel arrays (execution_id, then the envelope) of several executions' events,
    each execution's first occurrence of an event_id only, as array literals (arrays.py)."""
    rows = [
        (execution_id, *row)
        for execution_id, events in events_by_execution.items()
        for row in _unique(events)
    ]
    return column_arrays(rows, 14, _SHIFTED_NUMBERS)


def completion_columns(
    completions: Sequence[tuple[str, str | None, str | None, Sequence[Event]]],
) -> list[str]:
    """The 14 parallel arrays of `event_columns` plus, per event, the job id and the lease id
    of the completion that carries it, from (execution_id, job_id, lease_id, events) tuples;
    an execution's first occurrence of an event_id only; array literals (arrays.py)."""
    seen: set[tuple[str, str]] = set()
    rows = []
    for execution_id, job_id, lease_id, events in completions:
        for event in events:
            row = _row(event)
            key = (execution_id, row[0])
            if key not in seen:
                seen.add(key)
                rows.append((execution_id, *row, job_id, lease_id))
    return column_arrays(rows, 16, _SHIFTED_NUMBERS)


# the number columns of (execution_id, *envelope)
_SHIFTED_NUMBERS = frozenset(i + 1 for i in ENVELOPE_NUMBERS)


def _unique(events: Sequence[Event | Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """First occurrence of each event_id, in order."""
    seen: set[str] = set()
    rows = []
    for event in events:
        row = _row(event)
        if row[0] not in seen:
            seen.add(row[0])
            rows.append(row)
    return rows


class PostgresEventLog:
    def __init__(self, pool: asyncpg.Pool, url: PgUrl, notifications: Notifications) -> None:
        self._pool = pool
        self._url = url
        self._notes = notifications

    async def create_execution(
        self, execution_id: str, playbook: str, parent_execution_id: str | None = None
    ) -> None:
        async def run() -> None:
            async with self._pool.acquire() as conn:
                await conn.execute(
                    q("create_execution"), execution_id, playbook, parent_execution_id
                )

        await with_retry(self._url, run)

    async def submit(
        self,
        execution_id: str,
        playbook: str,
        parent_execution_id: str | None,
        requested: Event,
    ) -> None:
        """A new execution, its first event (`requested`) and its offer to the servers
        (`offer_executions`) in one transaction: one commit where the three statements one
        after another took three (the service's `POST /api/execute`). Idempotent, like each
        of them."""
        rows = _unique([requested])

        async def run() -> None:
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(
                    q("create_execution"), execution_id, playbook, parent_execution_id
                )
                await conn.fetch(q("append_events"), execution_id, *envelope_arrays(rows))
                await conn.fetch(q("offer_executions"), [execution_id])

        await with_retry(self._url, run)

    async def append(
        self, execution_id: str, events: Sequence[Event | Mapping[str, Any]]
    ) -> list[tuple[str, int]]:
        """Store the events not stored yet; returns their (event_id, seq) in seq order.
        Idempotent: appending the same batch again returns []."""
        rows = _unique(events)
        if not rows:
            return []

        async def run() -> list[tuple[str, int]]:
            async with self._pool.acquire() as conn:
                if len(rows) >= COPY_THRESHOLD:
                    return await _append_copy(conn, execution_id, rows)
                columns = envelope_arrays(rows)
                stored = await conn.fetch(q("append_events"), execution_id, *columns)
                return [(r["out_event_id"], r["out_seq"]) for r in stored]

        try:
            return await with_retry(self._url, run)
        except asyncpg.NoDataFoundError:
            raise _never_created(execution_id) from None

    async def append_if(
        self,
        execution_id: str,
        events: Sequence[Event | Mapping[str, Any]],
        last_seq: int | None = None,
    ) -> list[tuple[str, int]] | None:
        """`append`, only while the log has not ended (its last event is not a terminal one)
        and, when `last_seq` is given, nobody appended past it: None, and nothing appended,
        otherwise. What a cancel appends (docs/distributed.md, "Cancel and signal")."""
        rows = _unique(events)

        async def run() -> list[tuple[str, int]] | None:
            async with self._pool.acquire() as conn, conn.transaction():
                end = await conn.fetchrow(q("lock_log_end"), execution_id)
                if end is None:
                    raise asyncpg.NoDataFoundError(execution_id)
                if end["name"] in TERMINAL_NAMES or last_seq not in (None, end["last_seq"]):
                    return None
                stored = await conn.fetch(q("append_events"), execution_id, *envelope_arrays(rows))
                return [(r["out_event_id"], r["out_seq"]) for r in stored]

        try:
            return await with_retry(self._url, run)
        except asyncpg.NoDataFoundError:
            raise _never_created(execution_id) from None

    async def create_child(
        self, execution_id: str, playbook: str, parent_id: str, root_id: str, limit: int
    ) -> int | None:
        """Create a child execution's row unless its root's tree holds `limit` executions
        already (0: no limit): None when created (or it existed), else the count the tree
        would reach. Counted and created under one lock per root, so workers starting
        children of one tree together cannot go past the budget."""

        async def run() -> int | None:
            async with self._pool.acquire() as conn, conn.transaction():
                await conn.execute(q("lock_tree"), root_id)
                if await conn.fetchval(q("execution_exists"), execution_id):
                    return None
                if limit:
                    count = int(await conn.fetchval(q("count_tree"), root_id)) + 1
                    if count > limit:
                        return count
                await conn.execute(q("create_execution"), execution_id, playbook, parent_id)
                return None

        return await with_retry(self._url, run)

    async def reserve_bytes(self, execution_id: str, size: int, limit: int) -> int | None:
        """Reserve `size` bytes of the execution's results within `limit` (its
        `stored_bytes`): None when granted, else the total they would reach."""

        async def run() -> int | None:
            async with self._pool.acquire() as conn:
                row = await conn.fetchrow(q("reserve_bytes"), execution_id, size, limit)
            if row is None or row["granted"] is not None or row["before"] is None:
                return None  # an unknown execution: nothing to bound
            return int(row["before"]) + size

        return await with_retry(self._url, run)

    async def append_and_enqueue(
        self,
        execution_id: str,
        events: Sequence[Event | Mapping[str, Any]],
        jobs: Sequence[JobSpec],
    ) -> list[tuple[str, int]]:
        """Enqueue `jobs` (of this execution) and append `events` in one transaction: the
        jobs become visible together with the events that caused them, in one round trip.
        Idempotent like `append` and `enqueue`; returns the appended (event_id, seq)."""
        if not jobs:
            return await self.append(execution_id, events)
        _, *columns = event_columns({execution_id: events})

        async def run() -> list[tuple[str, int]]:
            async with self._pool.acquire() as conn:
                stored = await conn.fetch(
                    q("append_and_enqueue"), execution_id, *columns, *job_columns(jobs)
                )
                return [(r["out_event_id"], r["out_seq"]) for r in stored]

        try:
            return await with_retry(self._url, run)
        except asyncpg.NoDataFoundError:
            raise _never_created(execution_id) from None

    async def read(
        self, execution_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[dict[str, Any]]:
        async def run() -> list[asyncpg.Record]:
            async with self._pool.acquire() as conn:
                return list(await conn.fetch(q("read_events"), execution_id, after_seq, limit))

        return [
            {**dict(r.items()), "payload": json.loads(r["payload"])}
            for r in await with_retry(self._url, run)
        ]

    async def read_inputs(
        self,
        execution_id: str,
        after_seq: int,
        sources: Collection[str],
        names: Collection[str],
    ) -> tuple[int, list[dict[str, Any]]]:
        """The log's last seq, and the events after `after_seq` of the given sources and
        names (what a control VM consumes), read in one snapshot."""

        async def run() -> list[asyncpg.Record]:
            async with self._pool.acquire() as conn:
                return list(
                    await conn.fetch(
                        q("read_inputs"), execution_id, after_seq, list(sources), list(names)
                    )
                )

        rows = await with_retry(self._url, run)
        if not rows:
            return after_seq, []
        events = []
        loads = json.loads
        for r in rows:
            if r["event_id"] is not None:
                event = dict(r.items())  # the server's hot path: one dict per event
                del event["last_seq"]
                event["payload"] = loads(event["payload"])
                events.append(event)
        return int(rows[0]["last_seq"]), events

    async def finish_execution(
        self, execution_id: str, status: str, summary: Mapping[str, Any] | None
    ) -> None:
        async def run() -> None:
            async with self._pool.acquire() as conn:
                await conn.execute(
                    q("finish_execution"), execution_id, status, encode_payload(summary)
                )

        await with_retry(self._url, run)

    async def execution(self, execution_id: str) -> dict[str, Any] | None:
        async def run() -> list[asyncpg.Record]:
            async with self._pool.acquire() as conn:
                return list(await conn.fetch(q("get_execution"), execution_id))

        rows = await with_retry(self._url, run)
        return _execution(rows[0]) if rows else None

    async def executions(self, limit: int | None = None) -> list[dict[str, Any]]:
        async def run() -> list[asyncpg.Record]:
            async with self._pool.acquire() as conn:
                return list(await conn.fetch(q("list_executions"), limit))

        return [_execution(r) for r in await with_retry(self._url, run)]

    async def wait_for_events(self, execution_id: str, after_seq: int, timeout: float) -> bool:
        """Sleep until the execution has events after `after_seq` (True) or `timeout` passed;
        woken by the NOTIFY that every append sends (`noetl_events` or `noetl_progress`, the
        execution id)."""
        await self._notes.ensure_listening(EVENTS, PROGRESS)
        event = self._notes.register(EVENTS, execution_id)
        self._notes.register(PROGRESS, execution_id, event)
        try:
            record = await self.execution(execution_id)
            if record is not None and record["last_seq"] > after_seq:
                return True
            return await self._notes.sleep_on(event, timeout)
        finally:
            self._notes.unregister(EVENTS, execution_id, event)
            self._notes.unregister(PROGRESS, execution_id, event)


def _never_created(execution_id: str) -> DatabaseError:
    return DatabaseError(
        "NOE804",
        f"cannot append events to execution {execution_id!r}: it was never created",
        "create the execution before appending its events",
    )


def job_columns(jobs: Sequence[JobSpec]) -> list[str]:
    """Jobs as enqueue's parallel arrays after execution_id: id, action, pool, payload,
    max_attempts, delay (array literals, arrays.py)."""
    return [
        text_array([j.job_id for j in jobs]),
        text_array([j.action_id for j in jobs]),
        text_array([j.pool for j in jobs]),
        text_array([encode_json(j.payload) for j in jobs]),
        number_array([j.max_attempts for j in jobs]),
        number_array([float(j.delay) for j in jobs]),
    ]


async def _append_copy(
    conn: asyncpg.Connection, execution_id: str, rows: list[tuple[Any, ...]]
) -> list[tuple[str, int]]:
    """The protocol of noetl_append_events, for large batches: lock the counter row, drop the
    ids already stored and everything after a terminal event (migration 0008), COPY the rest
    with their seqs, move the counter, notify."""
    async with conn.transaction():
        row = await conn.fetchrow(
            "SELECT last_seq, ended_seq FROM executions WHERE execution_id = $1 FOR UPDATE",
            execution_id,
        )
        if row is None:
            raise asyncpg.NoDataFoundError(f"unknown execution {execution_id}")
        last, ended = row["last_seq"], row["ended_seq"]
        if ended is not None:
            return []  # the execution has ended: nothing more is logged
        stored = {
            r[0]
            for r in await conn.fetch(
                "SELECT event_id FROM events WHERE execution_id = $1 AND event_id = ANY($2)",
                execution_id,
                [row[0] for row in rows],
            )
        }
        fresh: list[tuple[Any, ...]] = []
        seen: set[str] = set()
        terminal = None
        for row in rows:
            if row[0] in stored or row[0] in seen:
                continue
            seen.add(row[0])
            fresh.append(row)
            if row[_NAME] in TERMINAL_NAMES:
                terminal = last + len(fresh)
                break  # the batch up to and with its first terminal event
        if not fresh:
            return []
        records = [(execution_id, last + i + 1, *row) for i, row in enumerate(fresh)]
        await conn.copy_records_to_table("events", records=records, columns=list(_COLUMNS))
        await conn.execute(
            "UPDATE executions SET last_seq = $2, ended_seq = $3 WHERE execution_id = $1",
            execution_id,
            last + len(records),
            terminal,
        )
        channel = EVENTS if any(r[_NAME] in SERVER_READS for r in fresh) else PROGRESS
        await conn.execute("SELECT pg_notify($1, $2)", channel, execution_id)
    return [(r[2], r[1]) for r in records]


def _execution(r: asyncpg.Record) -> dict[str, Any]:
    out = dict(r.items())
    out["summary"] = json.loads(r["summary"]) if r["summary"] else None
    return out


class PostgresResultStore:
    """Large payloads by key; `put` is idempotent and content-addressed callers may reuse keys."""

    def __init__(self, pool: asyncpg.Pool, url: PgUrl) -> None:
        self._pool = pool
        self._url = url

    async def put(self, key: str, data: bytes, execution_id: str | None = None) -> dict[str, Any]:
        checksum = "sha256:" + hashlib.sha256(data).hexdigest()

        async def run() -> None:
            async with self._pool.acquire() as conn:
                await conn.execute(q("put_result"), key, execution_id, len(data), checksum, data)

        await with_retry(self._url, run)
        return {"store": "postgres", "key": key, "size": len(data), "checksum": checksum}

    async def get(self, key: str) -> bytes | None:
        async def run() -> list[asyncpg.Record]:
            async with self._pool.acquire() as conn:
                return list(await conn.fetch(q("get_result"), key))

        rows = await with_retry(self._url, run)
        return bytes(rows[0]["content"]) if rows else None

    async def delete_execution(self, execution_id: str) -> int:
        async def run() -> str:
            async with self._pool.acquire() as conn:
                return str(await conn.execute(q("delete_execution_results"), execution_id))

        return int((await with_retry(self._url, run)).split()[-1])
