"""Group commit: the events of internal work wait and are appended in one transaction.

The rule: every acknowledged event is durable before the next command is issued. The
embedded runtime runs `noop`-only actions inline: no thread, no tool, nothing outside the
process sees them. Their events, and the control VM's answers to them, are therefore not
acknowledged to anyone, and committing each step's batch on its own (one fsync-free WAL commit,
still ~30-300 µs) made a 1,000-iteration noop loop spend most of its time in COMMIT. A
`GroupCommit` collects those events and appends them as one batch (one transaction) when the
owner calls `flush` — before anything externally visible happens (docs/runtime.md lists the
points) — or by itself when the group reaches `max_events` events or has been open
`max_seconds`, which bounds the work a crash can throw away and how stale a reader of the log
(`noetl-vm events`, the progress display) can be.

The log stays a prefix of the run: groups are appended whole and in order, so a process killed
with a group pending leaves the log as it was after the previous group, and `resume` replays
that prefix and runs the lost inline actions again (they are deterministic and were never
acknowledged). The benchmark `bench/test_bench_vm_core.py::test_control_vm_firings_sqlite`
drives the control VM through this class, so it measures the policy the runtime uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from noetlc.runtime.event_store import EventStore
from noetlc.vm.protocol import Event

# bounds of one group: enough to fold a 1,000-iteration noop loop into a few commits, small
# enough that a crash loses at most a few milliseconds of inline work
MAX_EVENTS = 1024
MAX_SECONDS = 0.05

OnCommit = Callable[[list[Event]], None]


class GroupCommit:
    __slots__ = (
        "commits",
        "execution_id",
        "max_events",
        "max_seconds",
        "on_commit",
        "opened",
        "pending",
        "store",
    )

    def __init__(
        self,
        store: EventStore,
        execution_id: str,
        on_commit: OnCommit | None = None,
        *,
        max_events: int = MAX_EVENTS,
        max_seconds: float = MAX_SECONDS,
    ) -> None:
        self.store = store
        self.execution_id = execution_id
        self.on_commit = on_commit  # sees each group once it is durable
        self.max_events = max_events
        self.max_seconds = max_seconds
        self.pending: list[Event] = []
        self.opened = 0.0  # time.monotonic() of the group's first event
        self.commits = 0

    def add(self, events: list[Event]) -> None:
        """Queue events for the open group; commit it when it reached a bound."""
        if not events:
            return
        pending = self.pending
        now = time.monotonic()
        if not pending:
            self.opened = now
        pending.extend(events)
        if len(pending) >= self.max_events or now - self.opened >= self.max_seconds:
            self.flush()

    def flush(self) -> None:
        """Append the open group in one transaction; returns once it is durable."""
        if not self.pending:
            return
        events, self.pending = self.pending, []
        self.store.append(self.execution_id, events)
        self.commits += 1
        if self.on_commit is not None:
            self.on_commit(events)
