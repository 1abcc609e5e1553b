"""A distributed cancel that races the server's own events (runtime/server.py `_cancel`).

The server has read a worker's result and will decide the loop's next iteration from it; a
cancel is asked for right after that result, before the server's round. The client only asks
(`execution.cancel.requested`): the server appends what it decided from the earlier result
first and the one `execution.cancelled` last, so the log checker finds nothing after the
terminal event and replay reproduces the log. When the client appended the terminal event
itself, the server's `loop.iteration.started` landed after it (`after-terminal`)."""

from __future__ import annotations

import asyncio
from typing import Any

from noetlc.runtime.driver import cancel_requested
from noetlc.runtime.logcheck import check_log
from noetlc.runtime.memory_backend import MemoryBackend
from noetlc.runtime.replay import check
from noetlc.runtime.server import Server
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.protocol import EventName, Source, envelope
from tests.runtime_contract.cluster_helpers import compiled, submit

SEQUENTIAL = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: sequential, path: t/sequential}
workload: {numbers: [1, 2, 3, 4]}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: each}]}
  - step: each
    loop: {in: "{{ workload.numbers }}", iterator: x, spec: {mode: sequential}}
    tool: {kind: python, input: {x: "{{ iter.x }}"}, code: "result = x * 10"}
    next: {arcs: [{step: end}]}
  - step: end
    tool: {kind: noop}
"""


def _iteration_done(started: dict[str, Any]) -> Any:
    """The result a worker would append for the iteration `started` began."""
    return envelope(
        EventName.LOOP_ITERATION_DONE,
        Source.WORKER,
        event_id=f"{started['action_id']}:1:0",
        step=started["step"],
        step_run_id=started["step_run_id"],
        iteration=started["iteration"],
        action_id=started["action_id"],
        payload={"result": 10},
    )


async def _scenario(reason: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    payload = compiled(SEQUENTIAL)
    backend = MemoryBackend()
    server = Server(backend, ttl=5.0, poll=0.05, inline=True)
    execution_id = await submit(backend, payload)
    await server.tick()  # adopts it: `start` runs inline, iteration 0 is enqueued
    log = await backend.events.read(execution_id)
    started = [e for e in log if e["name"] == EventName.LOOP_ITERATION_STARTED]
    assert [e["iteration"] for e in started] == [0]
    # iteration 0's result, then the cancel, both before the server's next round
    await backend.events.append(execution_id, [_iteration_done(started[0])])
    asked = await backend.events.append_if(
        execution_id, [cancel_requested(f"{execution_id}:request:1", reason)]
    )
    assert asked
    for _ in range(5):
        await server.tick()
        if execution_id not in server.owned:
            break
    record = await backend.events.execution(execution_id)
    assert record is not None
    return record, await backend.events.read(execution_id), payload


def test_the_cancel_is_the_last_event_after_the_servers_own() -> None:
    record, events, payload = asyncio.run(_scenario("maintenance window"))
    names = [e["name"] for e in events]
    assert record["status"] == "cancelled"
    assert names[-1] == EventName.EXECUTION_CANCELLED
    assert names.count(EventName.EXECUTION_CANCELLED) == 1
    assert events[-1]["payload"]["reason"] == "maintenance window"
    # the race was there: the server decided iteration 1 from the result before the cancel
    asked = names.index(EventName.CANCEL_REQUESTED)
    assert EventName.LOOP_ITERATION_STARTED in names[asked:-1]
    assert check_log(record["execution_id"], events, record["status"]) == []
    report = check(
        LoadedProgram(payload), record["execution_id"], dict(payload["workload"]), events
    )
    assert report.ok, report.divergence
    assert record["summary"]["steps"]["each"]["status"] == "cancelled"
