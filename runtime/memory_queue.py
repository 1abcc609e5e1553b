"""The job queue and execution ownership in one process's memory (runtime/queue.py).

Same semantics as the PostgreSQL queue — FIFO per pool, leases with expiry and a fresh
`lease_id` per grant, attempt + 1 on expiry, wake-ups on enqueue — so the embedded runtime and
the distributed one drive one interface, and the contract suite checks both. Not thread-safe:
one asyncio loop. `clock` is injectable so tests can expire leases without sleeping.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from noetlc.runtime.queue import (
    DEFAULT_POOL,
    FinalStatus,
    JobSpec,
    JobState,
    JobStatus,
    Lease,
    Ownership,
    ReapedJob,
)


@dataclass(slots=True)
class _Job:
    spec: JobSpec
    seq: int
    status: JobStatus
    attempt: int
    available_at: float
    owner: str | None = None
    lease_id: str | None = None
    expires_at: float | None = None
    error: str | None = None


class MemoryJobQueue:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._jobs: dict[str, _Job] = {}
        self._seq = 0
        self._wakeups: dict[str, asyncio.Event] = {}

    def _wake(self, pool: str) -> None:
        event = self._wakeups.get(pool)
        if event is not None:
            event.set()

    async def enqueue(self, jobs: Sequence[JobSpec]) -> int:
        now = self._clock()
        added = 0
        for spec in jobs:
            if spec.job_id in self._jobs:
                continue
            self._seq += 1
            self._jobs[spec.job_id] = _Job(spec, self._seq, "queued", 1, now + spec.delay)
            added += 1
            self._wake(spec.pool)
        return added

    async def lease(
        self, owner: str, *, pool: str = DEFAULT_POOL, limit: int = 1, ttl: float = 30.0
    ) -> list[Lease]:
        now = self._clock()
        ready = sorted(
            (
                j
                for j in self._jobs.values()
                if j.status == "queued" and j.spec.pool == pool and j.available_at <= now
            ),
            key=lambda j: j.seq,
        )[:limit]
        out = []
        for job in ready:
            job.status = "leased"
            job.owner = owner
            job.lease_id = str(uuid.uuid4())
            job.expires_at = now + ttl
            out.append(_lease(job))
        return out

    def _current(self, lease: Lease) -> _Job | None:
        job = self._jobs.get(lease.job_id)
        if job is None or job.status != "leased" or job.lease_id != lease.lease_id:
            return None
        return job

    async def complete(
        self, leases: Sequence[Lease], *, status: FinalStatus = "done", error: str | None = None
    ) -> set[str]:
        accepted = set()
        for lease in leases:
            job = self._current(lease)
            if job is not None:
                job.status = status
                job.error = error
                job.expires_at = None
                accepted.add(job.spec.job_id)
        return accepted

    async def complete_and_lease(
        self,
        done: Sequence[Lease],
        owner: str,
        *,
        pool: str = DEFAULT_POOL,
        limit: int = 1,
        ttl: float = 30.0,
    ) -> tuple[set[str], list[Lease]]:
        accepted = await self.complete(done)
        return accepted, await self.lease(owner, pool=pool, limit=limit, ttl=ttl)

    async def heartbeat(self, leases: Sequence[Lease], *, ttl: float = 30.0) -> set[str]:
        now = self._clock()
        held = set()
        for lease in leases:
            job = self._current(lease)
            if job is not None:
                job.expires_at = now + ttl
                held.add(job.spec.job_id)
        return held

    async def release(self, leases: Sequence[Lease]) -> set[str]:
        released = set()
        for lease in leases:
            job = self._current(lease)
            if job is not None:
                _unlease(job, "queued")
                job.available_at = self._clock()
                released.add(job.spec.job_id)
                self._wake(job.spec.pool)
        return released

    async def reap(self, *, limit: int = 1000) -> list[ReapedJob]:
        now = self._clock()
        expired = sorted(
            (
                j
                for j in self._jobs.values()
                if j.status == "leased" and j.expires_at is not None and j.expires_at < now
            ),
            key=lambda j: j.expires_at or 0.0,
        )[:limit]
        out = []
        for job in expired:
            job.error = f"lease of {job.owner or '?'} expired"
            if job.attempt >= job.spec.max_attempts:
                _unlease(job, "failed")
            else:
                _unlease(job, "queued")
                job.attempt += 1
                job.available_at = now
                self._wake(job.spec.pool)
            spec = job.spec
            out.append(
                ReapedJob(
                    spec.job_id,
                    spec.execution_id,
                    spec.action_id,
                    spec.pool,
                    job.status,
                    job.attempt,
                    spec.max_attempts,
                    job.error,
                )
            )
        return out

    async def cancel_execution(self, execution_id: str) -> set[str]:
        cancelled = set()
        for job in self._jobs.values():
            if job.spec.execution_id == execution_id and job.status in ("queued", "leased"):
                job.status = "cancelled"
                job.expires_at = None
                cancelled.add(job.spec.job_id)
        return cancelled

    async def cancel_jobs(self, job_ids: Sequence[str]) -> set[str]:
        cancelled = set()
        for job_id in job_ids:
            job = self._jobs.get(job_id)
            if job is not None and job.status in ("queued", "leased"):
                job.status = "cancelled"
                job.expires_at = None
                cancelled.add(job_id)
        return cancelled

    async def wait_for_work(self, pool: str = DEFAULT_POOL, timeout: float = 1.0) -> bool:
        now = self._clock()
        waiting = [
            j.available_at
            for j in self._jobs.values()
            if j.status == "queued" and j.spec.pool == pool
        ]
        next_ready = min(waiting) - now if waiting else None
        if next_ready is not None and next_ready <= 0:
            return True
        event = self._wakeups.setdefault(pool, asyncio.Event())
        event.clear()
        # A delayed job becomes leasable without a wake-up: sleep no longer than until then.
        sleep = timeout if next_ready is None else min(timeout, next_ready)
        try:
            await asyncio.wait_for(event.wait(), sleep)
        except TimeoutError:
            return next_ready is not None and next_ready <= timeout
        return True

    async def get(self, job_id: str) -> JobState | None:
        job = self._jobs.get(job_id)
        return None if job is None else _state(job)

    async def get_many(self, job_ids: Sequence[str]) -> list[JobState]:
        return [_state(self._jobs[j]) for j in dict.fromkeys(job_ids) if j in self._jobs]

    async def close(self) -> None:
        self._wakeups.clear()


def _state(job: _Job) -> JobState:
    spec = job.spec
    return JobState(
        spec.job_id,
        spec.execution_id,
        spec.action_id,
        spec.pool,
        spec.payload,
        job.status,
        job.attempt,
        spec.max_attempts,
        job.owner,
        job.lease_id,
        job.error,
    )


def _lease(job: _Job) -> Lease:
    spec = job.spec
    assert job.owner is not None and job.lease_id is not None and job.expires_at is not None
    return Lease(
        spec.job_id,
        spec.execution_id,
        spec.action_id,
        spec.pool,
        spec.payload,
        job.attempt,
        spec.max_attempts,
        job.owner,
        job.lease_id,
        job.expires_at,
    )


def _unlease(job: _Job, status: JobStatus) -> None:
    job.status = status
    job.owner = None
    job.lease_id = None
    job.expires_at = None


@dataclass(slots=True)
class _Owned:
    created: int
    owner: str | None = None
    epoch: int = 0
    expires_at: float | None = None


class MemoryOwnership:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._rows: dict[str, _Owned] = {}
        self._created = 0
        self._offered = asyncio.Event()

    def _live(self, row: _Owned, now: float) -> bool:
        return row.owner is not None and row.expires_at is not None and row.expires_at >= now

    async def offer(self, execution_ids: Sequence[str]) -> int:
        added = 0
        for execution_id in execution_ids:
            if execution_id not in self._rows:
                self._created += 1
                self._rows[execution_id] = _Owned(self._created)
                added += 1
        if added:
            self._offered.set()
        return added

    def _take(self, execution_id: str, row: _Owned, owner: str, ttl: float) -> Ownership:
        now = self._clock()
        if not (row.owner == owner and self._live(row, now)):
            row.epoch += 1
        row.owner = owner
        row.expires_at = now + ttl
        return Ownership(execution_id, owner, row.epoch, row.expires_at)

    async def claim(self, owner: str, *, limit: int = 10, ttl: float = 30.0) -> list[Ownership]:
        now = self._clock()
        free = sorted(
            ((eid, row) for eid, row in self._rows.items() if not self._live(row, now)),
            key=lambda item: item[1].created,
        )[:limit]
        return [self._take(eid, row, owner, ttl) for eid, row in free]

    async def acquire(
        self, execution_id: str, owner: str, *, ttl: float = 30.0
    ) -> Ownership | None:
        row = self._rows.get(execution_id)
        if row is None:
            return None
        if self._live(row, self._clock()) and row.owner != owner:
            return None
        return self._take(execution_id, row, owner, ttl)

    async def renew(
        self, owner: str, execution_ids: Sequence[str], *, ttl: float = 30.0
    ) -> set[str]:
        now = self._clock()
        kept = set()
        for execution_id in execution_ids:
            row = self._rows.get(execution_id)
            if row is not None and row.owner == owner:
                row.expires_at = now + ttl
                kept.add(execution_id)
        return kept

    async def release(self, owner: str, execution_ids: Sequence[str]) -> set[str]:
        released = set()
        for execution_id in execution_ids:
            row = self._rows.get(execution_id)
            if row is not None and row.owner == owner:
                row.owner = None
                row.expires_at = None
                released.add(execution_id)
        if released:
            self._offered.set()
        return released

    async def retire(self, owner: str, execution_id: str) -> bool:
        row = self._rows.get(execution_id)
        if row is None or row.owner != owner:
            return False
        del self._rows[execution_id]
        return True

    async def owner_of(self, execution_id: str) -> Ownership | None:
        row = self._rows.get(execution_id)
        if row is None or not self._live(row, self._clock()):
            return None
        assert row.owner is not None and row.expires_at is not None
        return Ownership(execution_id, row.owner, row.epoch, row.expires_at)

    async def wait_for_offers(self, timeout: float = 1.0) -> bool:
        now = self._clock()
        if any(not self._live(row, now) for row in self._rows.values()):
            return True
        self._offered.clear()
        try:
            await asyncio.wait_for(self._offered.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        pass
