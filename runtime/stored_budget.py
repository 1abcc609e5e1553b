"""The `stored_bytes` budget of a distributed execution: its results, handed in by several
workers, counted in one place.

Embedded mode counts an execution's results in its one process (runtime/results.py). Here each
worker measures the results it logs (`References.measured`, the JSON it writes anyway) and,
before it completes the jobs, reserves their bytes from the execution's row
(`executions.stored_bytes`, `EventLog.reserve_bytes`: granted only while the total stays within
the budget). A worker reserves in chunks (`CHUNK`, or what one result needs) and spends its
allowance locally, so a busy worker asks the database once per chunk, not once per result; an
allowance left when the execution ends is counted but never used (the budget is a bound, and
stays one). A result that cannot be reserved becomes its action's NOE858 failure, as in
embedded mode, before it is logged; a completion the queue then refuses (a stale lease) has
reserved its bytes anyway: counted twice at worst, never missed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from noetlc.runtime.backend import Completion, EventLog
from noetlc.runtime.results import References, over_budget_event, stored_over_budget

CHUNK = 4 * 1024 * 1024  # bytes a worker reserves at once (at most a sixteenth of the budget)


class StoredBytes:
    """One worker's allowances, per execution."""

    def __init__(self, events: EventLog) -> None:
        self.events = events
        self.allowance: dict[str, int] = {}

    async def admit(
        self, completions: Sequence[Completion], refs_of: Callable[[str], References | None]
    ) -> list[Completion]:
        """The completions with each result past the budget replaced by its failure."""
        out: list[Completion] = []
        for lease, events in completions:
            refs = refs_of(lease.execution_id)
            measured = None if refs is None else refs.measured
            if not measured or refs is None:
                out.append((lease, events))
                continue
            kept = []
            for event in events:
                size = measured.pop(str(event.event_id), 0)
                if size:
                    total = await self._reserve(lease.execution_id, size, refs.shared_limit)
                    if total is not None:
                        error = stored_over_budget(total, refs.shared_limit, event.step, size)
                        event = over_budget_event(event, error)
                kept.append(event)
            out.append((lease, kept))
        if len(self.allowance) > 10_000:  # executions long ended
            self.allowance.clear()
        return out

    async def _reserve(self, execution_id: str, size: int, limit: int) -> int | None:
        """None when `size` bytes are within the budget (spent from the allowance, reserving
        more when needed); else the total the execution would reach."""
        left = self.allowance.get(execution_id, 0)
        if size <= left:
            self.allowance[execution_id] = left - size
            return None
        need = size - left
        chunk = max(need, min(CHUNK, limit // 16))
        total = await self.events.reserve_bytes(execution_id, chunk, limit)
        if total is not None and chunk > need:  # what is left of the budget may still do
            chunk = need
            total = await self.events.reserve_bytes(execution_id, chunk, limit)
        if total is not None:
            return total  # what the results would reach with this one (its allowance spent)
        self.allowance[execution_id] = left + chunk - size
        return None


__all__ = ["CHUNK", "StoredBytes"]
