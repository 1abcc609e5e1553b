"""A distributed worker's share of an execution's `stored_bytes` (runtime/stored_budget.py):
results are reserved in chunks against the execution's row; one past the budget becomes its
action's NOE858 failure before it is logged."""

from __future__ import annotations

import asyncio

from noetlc.runtime.memory_backend import MemoryBackend
from noetlc.runtime.queue import Lease
from noetlc.runtime.results import References
from noetlc.runtime.stored_budget import StoredBytes
from noetlc.vm.protocol import EventName, Source, envelope


def _done(index: int, size: int) -> tuple[str, object]:
    event = envelope(
        EventName.LOOP_ITERATION_DONE,
        Source.WORKER,
        event_id=f"a{index}:1:0",
        step="grow",
        step_run_id="grow#1",
        iteration=index,
        action_id=f"a{index}",
        payload={"result": "g" * size},
    )
    return event.event_id, event


def test_results_past_the_shared_budget_become_failures() -> None:
    async def scenario() -> list[str]:
        backend = MemoryBackend()
        await backend.events.create_execution("x", "p")
        refs = References(backend.result_store(), None, {})
        refs.share_total(10_000)
        two = [StoredBytes(backend.events), StoredBytes(backend.events)]  # two workers
        names = []
        for index in range(8):
            _, event = _done(index, 2_998)  # 3,000 bytes of JSON each
            refs.shrink_event(event)  # type: ignore[arg-type]
            lease = Lease(f"j{index}", "x", f"a{index}", "default", {}, 1, 3, "w", "l", 0.0)
            admitted = await two[index % 2].admit([(lease, [event])], lambda _: refs)  # type: ignore[list-item]
            names.append(admitted[0][1][0].name)
        return names

    names = asyncio.run(scenario())
    assert names[:3] == ["loop.iteration.done"] * 3  # 9,000 bytes of the 10,000
    assert set(names[3:]) == {"loop.iteration.failed"}
