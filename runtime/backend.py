"""What distributed servers and workers run on, as interfaces: the event log, the job queue
and its worker rounds, execution ownership, wake-ups, the result store.

`Backend` bundles them. `postgres/database.py` (`Database`: any number of processes sharing one
PostgreSQL) and `memory_backend.py` (`MemoryBackend`: one process, tests) implement it, so the
server's and the worker's logic runs — and is tested — on either. The server and the worker
call nothing but the methods declared here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from noetlc.ir.events import EventName
from noetlc.runtime.queue import DEFAULT_POOL, ExecutionOwnership, JobQueue, JobSpec, Lease
from noetlc.vm.protocol import INPUT_NAMES, Event

ANY_KEY = "*"  # a waiter for every key of a channel

# the wake-up channels: leasable jobs (key: the pool), claimable executions, new events a
# server reads (key: the execution), and new events no server reads (`PROGRESS`: a task
# started; key: the execution) — followers of a log wait for both, servers for `EVENTS` only
JOBS, EXECUTIONS, EVENTS = "noetl_jobs", "noetl_executions", "noetl_events"
PROGRESS = "noetl_progress"

# the events a server reads of its executions' logs: the VM's inputs and the cancel requests
# (an append with none of them notifies `PROGRESS`; migration 0010 lists the same names)
SERVER_READS = INPUT_NAMES | {EventName.CANCEL_REQUESTED.value}

EventLike = Event | Mapping[str, Any]

# a job a worker finished and the events it produced (all of the lease's execution): the
# events are appended only if the completion is accepted (the lease is still current)
Completion = tuple[Lease, Sequence[Event]]


class EventLog(Protocol):
    """Every execution's log (events with store-assigned gap-free `seq`, idempotent on
    `event_id` within an execution) and its record (status, summary, `last_seq`)."""

    async def create_execution(
        self, execution_id: str, playbook: str, parent_execution_id: str | None = None
    ) -> None: ...

    async def create_child(
        self, execution_id: str, playbook: str, parent_id: str, root_id: str, limit: int
    ) -> int | None:
        """`create_execution` of a child unless its root's tree holds `limit` executions (0:
        no limit); None when created (or it existed), else the count it would reach."""
        ...

    async def reserve_bytes(self, execution_id: str, size: int, limit: int) -> int | None:
        """Reserve `size` bytes of the execution's results within `limit` (`stored_bytes`):
        None when granted, else the total they would reach (runtime/stored_budget.py)."""
        ...

    async def append(self, execution_id: str, events: Sequence[EventLike]) -> list[tuple[str, int]]:
        """Store the events not stored yet; their (event_id, seq) in seq order."""
        ...

    async def append_if(
        self, execution_id: str, events: Sequence[EventLike], last_seq: int | None = None
    ) -> list[tuple[str, int]] | None:
        """`append`, only while the log has no terminal event at its end and, when `last_seq`
        is given, ends at `last_seq`; None, nothing appended, otherwise."""
        ...

    async def append_and_enqueue(
        self, execution_id: str, events: Sequence[EventLike], jobs: Sequence[JobSpec]
    ) -> list[tuple[str, int]]:
        """`append` and enqueue the jobs those events caused, in one transaction."""
        ...

    async def read(
        self, execution_id: str, after_seq: int = 0, limit: int | None = None
    ) -> list[dict[str, Any]]: ...

    async def read_inputs(
        self,
        execution_id: str,
        after_seq: int,
        sources: Collection[str],
        names: Collection[str],
    ) -> tuple[int, list[dict[str, Any]]]:
        """The log's last seq, and the events after `after_seq` of these sources and names."""
        ...

    async def finish_execution(
        self, execution_id: str, status: str, summary: Mapping[str, Any] | None
    ) -> None: ...

    async def execution(self, execution_id: str) -> dict[str, Any] | None: ...

    async def wait_for_events(self, execution_id: str, after_seq: int, timeout: float) -> bool:
        """Sleep until the execution has events after `after_seq` (True) or `timeout` passed."""
        ...


class WorkerRound(Protocol):
    """The statements of one worker round (one transaction: all of it or nothing)."""

    async def pick(self, limit: int) -> list[Lease]:
        """Up to `limit` leasable jobs, held by this round but not leased."""
        ...

    async def lease_picked(self, picked: Sequence[Lease]) -> list[Lease]:
        """Lease picked jobs (those that will run outside this round)."""
        ...

    async def unpick(self, picked: Sequence[Lease]) -> None:
        """Give picked jobs back unrun and unleased (no attempt spent): queued as before."""
        ...

    async def finish(
        self, done: Sequence[Completion], ran: Sequence[Completion], idle: float = 0.0
    ) -> set[str]:
        """Complete `done` (leased jobs) and `ran` (picked and run in this round) and append
        the events of the completions accepted; returns the accepted job ids. Fencing: a
        completion whose lease is no longer current (expired and re-queued or granted again,
        or the job cancelled) is refused entirely, its events are not appended. `idle` > 0:
        the worker sleeps after this round until a job comes: it asks to be the one woken
        for the next job for that many seconds (a hint, `finish_and_lease`)."""
        ...


class RoundQueue(JobQueue, Protocol):
    """The job queue with worker rounds."""

    def round(
        self, owner: str, *, pool: str = DEFAULT_POOL, ttl: float = 30.0
    ) -> AbstractAsyncContextManager[WorkerRound]: ...

    async def append_fenced(self, lease: Lease, events: Sequence[Event]) -> bool:
        """Append events of a job still running (a finished task's), only while `lease` is
        current: False, and nothing appended, when it is not (fencing)."""
        ...

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
        """A round without inline jobs in one step: `finish(done, [])` (fenced, the events
        of the accepted completions appended) then `lease(owner, ...)`; all of it or nothing.
        Returns (accepted job ids, new leases). `idle` > 0: when nothing is leased the worker
        sleeps until a job comes, and asks to be woken for one (not every idle worker of the
        pool) for that many seconds; 0: it will not sleep (a request it made is withdrawn)."""
        ...


class Notifications(Protocol):
    """Wake-ups: a hint, never a source of truth (callers always query after waking)."""

    ignore_own: bool  # this process's own writes wake nobody here

    async def ensure_listening(self, *channels: str) -> bool:
        """Listen to `channels` (none: every channel) from now on; False when unreachable."""
        ...

    def register(
        self, channel: str, key: str = ANY_KEY, event: asyncio.Event | None = None
    ) -> asyncio.Event:
        """Register before checking for work, so a wake-up in between is not lost (`event`:
        one already registered for another channel, woken by either)."""
        ...

    def unregister(self, channel: str, key: str, event: asyncio.Event) -> None: ...

    async def sleep_on(self, event: asyncio.Event, timeout: float) -> bool: ...

    def collect(self, channel: str) -> set[str]:
        """A set every later wake-up of `channel` adds its key to (the caller empties it)."""
        ...

    def uncollect(self, channel: str, keys: set[str]) -> None: ...


class Waiters:
    """The wake-up table both notification implementations keep: events registered per
    (channel, key); `wake` sets those of the key and of `ANY_KEY`."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, str], set[asyncio.Event]] = {}
        self._collectors: dict[str, list[set[str]]] = {}

    def wake(self, channel: str, key: str) -> None:
        for k in (key, ANY_KEY):
            for event in self._waiters.get((channel, k), ()):
                event.set()
        for keys in self._collectors.get(channel, ()):
            keys.add(key)

    def collect(self, channel: str) -> set[str]:
        """A set every later wake-up of `channel` adds its key to (the caller empties it): a
        server learns which executions got events, not only that some did."""
        keys: set[str] = set()
        self._collectors.setdefault(channel, []).append(keys)
        return keys

    def uncollect(self, channel: str, keys: set[str]) -> None:
        collectors = self._collectors.get(channel, [])
        if any(k is keys for k in collectors):
            collectors[:] = [k for k in collectors if k is not keys]

    def register(
        self, channel: str, key: str = ANY_KEY, event: asyncio.Event | None = None
    ) -> asyncio.Event:
        """Register before checking for work, so a wake-up in between is not lost (`event`:
        one already registered for another channel, woken by either)."""
        event = event or asyncio.Event()
        self._waiters.setdefault((channel, key), set()).add(event)
        return event

    def unregister(self, channel: str, key: str, event: asyncio.Event) -> None:
        waiters = self._waiters.get((channel, key))
        if waiters is not None:
            waiters.discard(event)
            if not waiters:
                del self._waiters[(channel, key)]

    @staticmethod
    async def sleep_on(event: asyncio.Event, timeout: float) -> bool:
        """Wait for the event at most `timeout` seconds; True when it was set."""
        try:
            await asyncio.wait_for(event.wait(), max(timeout, 0.0))
        except TimeoutError:
            return False
        return True


class BlockingResultStore(Protocol):
    """Reference-first results, called synchronously (templates, the pipeline VM)."""

    def put_result(self, key: str, data: bytes) -> None: ...
    def get_result(self, key: str) -> bytes | None: ...
    def close(self) -> None: ...


class TaskLogs(Protocol):
    """What tasks printed (runtime/logs.py rows), per execution."""

    async def append(self, execution_id: str, rows: list[dict[str, Any]]) -> None: ...
    async def read(
        self,
        execution_id: str,
        after: int = 0,
        step: str | None = None,
        iteration: int | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]: ...


class Backend(Protocol):
    notifications: Notifications
    queue: RoundQueue
    owners: ExecutionOwnership
    events: EventLog
    logs: TaskLogs

    def result_store(self) -> BlockingResultStore:
        """A result store this process may call from any thread (one per server or worker)."""
        ...


__all__ = [
    "ANY_KEY",
    "EVENTS",
    "EXECUTIONS",
    "JOBS",
    "PROGRESS",
    "SERVER_READS",
    "Backend",
    "BlockingResultStore",
    "Completion",
    "EventLog",
    "Notifications",
    "RoundQueue",
    "TaskLogs",
    "Waiters",
    "WorkerRound",
]
