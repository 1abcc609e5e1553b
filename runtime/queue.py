"""The job queue and execution ownership, as interfaces (distributed mode).

A *job* is one command of a control VM (run a step, or one loop iteration) for the pipeline
VM. Servers enqueue jobs; workers lease them in batches, run them, append the resulting events
and complete them. A lease has an expiry: a worker that stops heartbeating loses its jobs to
the reaper, which re-queues each with `attempt + 1`, or fails it when it has used
`max_attempts` leases (the server turns those into `task`/`step` failure events). Every lease
has its own `lease_id`, a fencing token: completing, heartbeating or releasing with a lease
that has since expired and been granted again is rejected, so a slow worker can never complete
a job another worker now owns.

*Ownership*: each running execution's control VM lives in one server at a time. A server
claims unowned executions (new submissions, or expired leases of a dead server), renews its
leases while it runs them, releases them on graceful shutdown and retires them when they
finish. `epoch` grows on every change of owner.

Implementations: `memory_queue.py` (one process: the embedded runtime and tests) and
`postgres/queue.py` (any number of processes sharing one PostgreSQL). Both pass
tests/runtime_contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

DEFAULT_POOL = "default"
JobStatus = Literal["queued", "leased", "done", "failed", "cancelled"]
FinalStatus = Literal["done", "failed"]


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What a server enqueues. `job_id` is the idempotency key: derive it from the command's
    `action_id` (and the loop iteration), so two servers that issue the same command, or one
    that re-issues it after a crash, create one job."""

    job_id: str
    execution_id: str
    action_id: str
    payload: dict[str, Any]
    pool: str = DEFAULT_POOL
    max_attempts: int = 3
    delay: float = 0.0  # seconds before the job may be leased (backoff between attempts)


@dataclass(frozen=True, slots=True)
class Lease:
    """A leased job: what a worker runs, and the token it must present to finish it."""

    job_id: str
    execution_id: str
    action_id: str
    pool: str
    payload: dict[str, Any] = field(compare=False)
    attempt: int
    max_attempts: int
    owner: str
    lease_id: str
    expires_at: float  # unix time, by the queue's clock


@dataclass(frozen=True, slots=True)
class ReapedJob:
    """A job whose lease expired: re-queued (`status == "queued"`, `attempt` is the new attempt)
    or failed for good (`status == "failed"`, `attempt == max_attempts`)."""

    job_id: str
    execution_id: str
    action_id: str
    pool: str
    status: JobStatus
    attempt: int
    max_attempts: int
    reason: str


@dataclass(frozen=True, slots=True)
class JobState:
    """A job as stored (status commands and tests)."""

    job_id: str
    execution_id: str
    action_id: str
    pool: str
    payload: dict[str, Any] = field(compare=False)
    status: JobStatus
    attempt: int
    max_attempts: int
    owner: str | None
    lease_id: str | None
    error: str | None


@dataclass(frozen=True, slots=True)
class Ownership:
    execution_id: str
    owner: str
    epoch: int
    expires_at: float


class JobQueue(Protocol):
    async def enqueue(self, jobs: Sequence[JobSpec]) -> int:
        """Store new jobs (idempotent on job_id); returns how many were new. Wakes waiters."""
        ...

    async def lease(
        self, owner: str, *, pool: str = DEFAULT_POOL, limit: int = 1, ttl: float = 30.0
    ) -> list[Lease]:
        """Up to `limit` leasable jobs of `pool`, oldest first; never one another owner holds."""
        ...

    async def complete(
        self, leases: Sequence[Lease], *, status: FinalStatus = "done", error: str | None = None
    ) -> set[str]:
        """Finish jobs; returns the job ids accepted. A lease that is no longer current (it
        expired and the job was re-leased, reaped, released or cancelled) is rejected."""
        ...

    async def complete_and_lease(
        self,
        done: Sequence[Lease],
        owner: str,
        *,
        pool: str = DEFAULT_POOL,
        limit: int = 1,
        ttl: float = 30.0,
    ) -> tuple[set[str], list[Lease]]:
        """`complete(done)` then `lease(owner, ...)` in one step (one round trip on
        PostgreSQL): a busy worker's loop. Returns (accepted job ids, new leases)."""
        ...

    async def heartbeat(self, leases: Sequence[Lease], *, ttl: float = 30.0) -> set[str]:
        """Extend leases by `ttl` from now; returns the job ids still held (a missing one was
        lost: the worker should stop working on it)."""
        ...

    async def release(self, leases: Sequence[Lease]) -> set[str]:
        """Give jobs back unfinished (graceful shutdown) without spending an attempt."""
        ...

    async def reap(self, *, limit: int = 1000) -> list[ReapedJob]:
        """Re-queue expired leases with attempt + 1, or fail jobs out of attempts."""
        ...

    async def cancel_execution(self, execution_id: str) -> set[str]:
        """Cancel an execution's queued and leased jobs (their holders' heartbeats fail)."""
        ...

    async def cancel_jobs(self, job_ids: Sequence[str]) -> set[str]:
        """Cancel these jobs if queued or leased (a fail_fast loop's other iterations): a
        queued one is never leased, a holder learns it on its next heartbeat."""
        ...

    async def wait_for_work(self, pool: str = DEFAULT_POOL, timeout: float = 1.0) -> bool:
        """Sleep until jobs may have become leasable in `pool` (True) or `timeout` passed
        (False). Spurious wake-ups are allowed: always lease afterwards."""
        ...

    async def get(self, job_id: str) -> JobState | None: ...

    async def get_many(self, job_ids: Sequence[str]) -> list[JobState]:
        """The stored jobs among these ids (any order; unknown ids are left out)."""
        ...

    async def close(self) -> None: ...


class ExecutionOwnership(Protocol):
    async def offer(self, execution_ids: Sequence[str]) -> int:
        """Make executions claimable by any server (idempotent); returns how many were new."""
        ...

    async def claim(self, owner: str, *, limit: int = 10, ttl: float = 30.0) -> list[Ownership]:
        """Take up to `limit` executions that are unowned or whose owner's lease expired."""
        ...

    async def acquire(
        self, execution_id: str, owner: str, *, ttl: float = 30.0
    ) -> Ownership | None:
        """Take one execution if it is unowned, expired or already ours; None otherwise."""
        ...

    async def renew(
        self, owner: str, execution_ids: Sequence[str], *, ttl: float = 30.0
    ) -> set[str]:
        """Extend our leases; returns the ids still ours (a missing one was stolen or retired)."""
        ...

    async def release(self, owner: str, execution_ids: Sequence[str]) -> set[str]:
        """Hand executions back so another server can claim them at once."""
        ...

    async def retire(self, owner: str, execution_id: str) -> bool:
        """The execution finished: it needs no owner any more."""
        ...

    async def owner_of(self, execution_id: str) -> Ownership | None:
        """The current live owner, or None (unowned, expired or retired)."""
        ...

    async def wait_for_offers(self, timeout: float = 1.0) -> bool:
        """Sleep until executions may have become claimable, or `timeout` passed."""
        ...

    async def close(self) -> None: ...
