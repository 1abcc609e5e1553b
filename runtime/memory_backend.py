"""The distributed backend in one process's memory (runtime/backend.py `Backend`).

The event log, the job queue with worker rounds, ownership, wake-ups and the result store,
with PostgreSQL's semantics where the server and the worker depend on them: gap-free `seq` per
execution, appends idempotent on `event_id` within an execution, jobs enqueued with the events
that caused them, a worker round that completes jobs and appends their events together (a job
cancelled meanwhile logs nothing), wake-ups on enqueue, offer and append. One asyncio loop, not
thread-safe except the result store. It lets the server and worker logic be tested without
PostgreSQL (tests/runtime_contract/test_contract_cluster.py); `clock` is injectable.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from noetlc.runtime.backend import (
    ANY_KEY,
    EVENTS,
    EXECUTIONS,
    JOBS,
    PROGRESS,
    SERVER_READS,
    Completion,
    EventLike,
    Waiters,
)
from noetlc.runtime.event_store import MemoryStore, stored_record
from noetlc.runtime.memory_queue import MemoryJobQueue, MemoryOwnership
from noetlc.runtime.queue import DEFAULT_POOL, JobSpec, Lease
from noetlc.vm.protocol import TERMINAL_NAMES, Event


class MemoryNotifications(Waiters):
    def __init__(self) -> None:
        super().__init__()
        self.ignore_own = False  # one process: nothing is "another process's" write

    def notify(self, channel: str, key: str) -> None:
        self.wake(channel, key)

    async def ensure_listening(self, *channels: str) -> bool:
        return True


class MemoryEventLog:
    def __init__(self, queue: MemoryJobQueue, notes: MemoryNotifications) -> None:
        self._queue = queue
        self._notes = notes
        self._executions: dict[str, dict[str, Any]] = {}
        self._logs: dict[str, list[dict[str, Any]]] = {}
        self._ids: dict[str, set[str]] = {}

    async def create_execution(
        self, execution_id: str, playbook: str, parent_execution_id: str | None = None
    ) -> None:
        if execution_id in self._executions:
            return
        self._executions[execution_id] = {
            "execution_id": execution_id,
            "playbook": playbook,
            "status": "running",
            "parent_execution_id": parent_execution_id,
            "created_at": time.time(),
            "finished_at": None,
            "summary": None,
            "last_seq": 0,
        }
        self._logs[execution_id] = []
        self._ids[execution_id] = set()

    async def create_child(
        self, execution_id: str, playbook: str, parent_id: str, root_id: str, limit: int
    ) -> int | None:
        if execution_id not in self._executions and limit:
            below: dict[str, list[str]] = {}
            for record in self._executions.values():
                if record["parent_execution_id"]:
                    below.setdefault(record["parent_execution_id"], []).append(
                        record["execution_id"]
                    )
            count, todo = 1, [root_id]
            while todo:
                children = below.get(todo.pop(), [])
                count += len(children)
                todo.extend(children)
            if count > limit:
                return count
        await self.create_execution(execution_id, playbook, parent_id)
        return None

    async def reserve_bytes(self, execution_id: str, size: int, limit: int) -> int | None:
        record = self._executions.get(execution_id)
        if record is None:
            return None
        total = int(record.get("stored_bytes", 0)) + size
        if total > limit:
            return total
        record["stored_bytes"] = total
        return None

    def append_now(self, execution_id: str, events: Sequence[EventLike]) -> list[tuple[str, int]]:
        record = self._executions.get(execution_id)
        if record is None:
            raise LookupError(f"cannot append events to execution {execution_id!r}")
        log, ids = self._logs[execution_id], self._ids[execution_id]
        stored = []
        now = time.time()
        for item in events:
            event = Event.from_record(item)
            event_id = str(event.event_id)
            if event_id in ids:
                continue
            ids.add(event_id)
            seq = len(log) + 1
            log.append(stored_record(execution_id, seq, event, now))
            stored.append((event_id, seq))
        if stored:
            record["last_seq"] = len(log)
            # as PostgreSQL's append: a batch with nothing a server reads wakes no server
            reads = any(str(e.get("name")) in SERVER_READS for e in log[-len(stored) :])
            self._notes.notify(EVENTS if reads else PROGRESS, execution_id)
        return stored

    async def append(self, execution_id: str, events: Sequence[EventLike]) -> list[tuple[str, int]]:
        return self.append_now(execution_id, events)

    async def append_if(
        self, execution_id: str, events: Sequence[EventLike], last_seq: int | None = None
    ) -> list[tuple[str, int]] | None:
        log = self._logs.get(execution_id)
        if log is None:
            raise LookupError(f"cannot append events to execution {execution_id!r}")
        if (log and log[-1]["name"] in TERMINAL_NAMES) or last_seq not in (None, len(log)):
            return None
        return self.append_now(execution_id, events)

    async def append_and_enqueue(
        self, execution_id: str, events: Sequence[EventLike], jobs: Sequence[JobSpec]
    ) -> list[tuple[str, int]]:
        stored = self.append_now(execution_id, events)
        if jobs:
            await self._queue.enqueue(jobs)
        return stored

    async def read(
        self, execution_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[dict[str, Any]]:
        log = self._logs.get(execution_id, [])[after_seq:]
        return [dict(e) for e in (log if limit is None else log[:limit])]

    async def read_inputs(
        self,
        execution_id: str,
        after_seq: int,
        sources: Collection[str],
        names: Collection[str],
    ) -> tuple[int, list[dict[str, Any]]]:
        if execution_id not in self._executions:
            return after_seq, []
        log = self._logs[execution_id]
        picked = [dict(e) for e in log[after_seq:] if e["source"] in sources and e["name"] in names]
        return len(log), picked

    async def finish_execution(
        self, execution_id: str, status: str, summary: Mapping[str, Any] | None
    ) -> None:
        record = self._executions.get(execution_id)
        if record is not None:
            record.update(status=status, summary=summary, finished_at=time.time())
            self._notes.notify(EVENTS, execution_id)

    async def execution(self, execution_id: str) -> dict[str, Any] | None:
        record = self._executions.get(execution_id)
        return None if record is None else dict(record)

    async def wait_for_events(self, execution_id: str, after_seq: int, timeout: float) -> bool:
        event = self._notes.register(EVENTS, execution_id)
        self._notes.register(PROGRESS, execution_id, event)
        try:
            record = self._executions.get(execution_id)
            if record is not None and record["last_seq"] > after_seq:
                return True
            return await self._notes.sleep_on(event, timeout)
        finally:
            self._notes.unregister(EVENTS, execution_id, event)
            self._notes.unregister(PROGRESS, execution_id, event)


class MemoryWorkerRound:
    """A worker round; the memory queue has no transactions, so a round that fails half-way
    keeps what it did (the tests that use it do not inject failures inside rounds)."""

    def __init__(self, queue: MemoryRoundQueue, owner: str, pool: str, ttl: float) -> None:
        self._queue = queue
        self.owner = owner
        self.pool = pool
        self.ttl = ttl

    async def pick(self, limit: int) -> list[Lease]:
        if limit <= 0:
            return []
        return await self._queue.lease(self.owner, pool=self.pool, limit=limit, ttl=self.ttl)

    async def lease_picked(self, picked: Sequence[Lease]) -> list[Lease]:
        return list(picked)  # picking leased them already

    async def unpick(self, picked: Sequence[Lease]) -> None:
        await self._queue.release(picked)  # picking leased them: released, no attempt spent

    async def finish(
        self, done: Sequence[Completion], ran: Sequence[Completion], idle: float = 0.0
    ) -> set[str]:
        queue = self._queue
        log = queue.log
        assert log is not None
        accepted: set[str] = set()
        for lease, events in [*done, *ran]:
            # picking leased them already: both kinds present their lease, and one whose
            # lease is no longer current (or whose job was cancelled) is refused with its
            # events
            if await queue.complete([lease]):
                accepted.add(lease.job_id)
                if events:
                    log.append_now(lease.execution_id, list(events))
        return accepted


class MemoryRoundQueue(MemoryJobQueue):
    """The memory job queue with worker rounds and wake-ups through `MemoryNotifications`."""

    def __init__(self, notes: MemoryNotifications, clock: Callable[[], float] = time.time):
        super().__init__(clock)
        self._notes = notes
        self.log: MemoryEventLog | None = None  # where a round appends its events

    def _wake(self, pool: str) -> None:
        super()._wake(pool)
        self._notes.notify(JOBS, pool)

    def status(self, job_id: str) -> str | None:
        job = self._jobs.get(job_id)
        return None if job is None else job.status

    async def append_fenced(self, lease: Lease, events: Sequence[Event]) -> bool:
        job = self._jobs.get(lease.job_id)
        if job is None or job.status != "leased" or job.lease_id != lease.lease_id:
            return False
        assert self.log is not None
        self.log.append_now(lease.execution_id, list(events))
        return True

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
        # `idle` registers a waiter in PostgreSQL (one worker woken per job); one process
        # wakes every waiter of the pool
        accepted = await MemoryWorkerRound(self, owner, pool, ttl).finish(done, [])
        return accepted, await self.lease(owner, pool=pool, limit=limit, ttl=ttl)

    @asynccontextmanager
    async def round(
        self, owner: str, *, pool: str = DEFAULT_POOL, ttl: float = 30.0
    ) -> AsyncIterator[MemoryWorkerRound]:
        yield MemoryWorkerRound(self, owner, pool, ttl)


class MemoryOwners(MemoryOwnership):
    def __init__(self, notes: MemoryNotifications, clock: Callable[[], float] = time.time):
        super().__init__(clock)
        self._notes = notes

    async def offer(self, execution_ids: Sequence[str]) -> int:
        added = await super().offer(execution_ids)
        if added:
            self._notes.notify(EXECUTIONS, ANY_KEY)
        return added

    async def release(self, owner: str, execution_ids: Sequence[str]) -> set[str]:
        released = await super().release(owner, execution_ids)
        if released:
            self._notes.notify(EXECUTIONS, ANY_KEY)
        return released


class MemoryResults:
    """Reference-first results in memory (thread-safe: tool threads store and read them)."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self.reads = 0

    def put_result(self, key: str, data: bytes) -> None:
        with self._lock:
            self._data.setdefault(key, data)

    def get_result(self, key: str) -> bytes | None:
        with self._lock:
            self.reads += 1
            return self._data.get(key)

    def close(self) -> None:
        pass


class MemoryTaskLogs:
    """Task logs in memory (the `MemoryStore`'s, behind the async interface)."""

    def __init__(self) -> None:
        self._store = MemoryStore()

    async def append(self, execution_id: str, rows: list[dict[str, Any]]) -> None:
        self._store.append_logs(execution_id, rows)

    async def read(
        self,
        execution_id: str,
        after: int = 0,
        step: str | None = None,
        iteration: int | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        return self._store.read_logs(execution_id, after, step, iteration, limit)


class MemoryBackend:
    """Everything a server and a worker need, in memory; share one between them."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.notifications = MemoryNotifications()
        self.queue = MemoryRoundQueue(self.notifications, clock)
        self.owners = MemoryOwners(self.notifications, clock)
        self.events = MemoryEventLog(self.queue, self.notifications)
        self.queue.log = self.events
        self.results = MemoryResults()
        self.logs = MemoryTaskLogs()

    def result_store(self) -> MemoryResults:
        return self.results


__all__ = ["MemoryBackend", "MemoryEventLog", "MemoryNotifications", "MemoryResults"]
