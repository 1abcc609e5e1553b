"""The embedded runtime: one process runs the control VM and the pipeline VM together.

Commands from the control VM (`dispatch`) are executed in order by the pipeline VM with the
in-process tools; each step's boundary event goes back to the control VM. Loops run their
iterations in input order (sequential and parallel alike, one process), collecting results;
under `fail_fast` the first failed iteration fails the step, under `best_effort` it yields
`null` and the loop finishes. Events go to an `EventStore` (runtime/store.py), one batch per step.
"""

from __future__ import annotations

import uuid
from collections import deque
from typing import Any

from noetlc.runtime.store import EventStore
from noetlc.stdlib_tools.basic import call_tool
from noetlc.vm.control import Command, ControlVM
from noetlc.vm.pipeline import run_pipeline
from noetlc.vm.program import Program


def run_embedded(
    payload: dict[str, Any],
    overrides: dict[str, Any] | None = None,
    store: EventStore | None = None,
) -> dict[str, Any]:
    """Run to completion. With a store, the events of every step are committed (one batch)
    before the next command is executed."""
    program = Program(payload)
    workload = {**program.workload, **(overrides or {})}
    vm = ControlVM(program, workload, execution_id=str(uuid.uuid4()))
    flushed = 0

    def flush() -> None:
        nonlocal flushed
        if store is not None and len(vm.events) > flushed:
            store.append(vm.execution_id, vm.events[flushed:])
            flushed = len(vm.events)

    if store is not None:
        store.create_execution(vm.execution_id, program.name)
    queue: deque[Command] = deque(vm.start())
    flush()
    while queue and not vm.finished():
        command = queue.popleft()
        queue.extend(vm.step(_execute(program, vm, command)))
        flush()
    if not vm.finished():
        vm.settle()
    flush()
    result = summary(vm)
    if store is not None:
        store.finish_execution(vm.execution_id, vm.status, result)
    return result


def _execute(program: Program, vm: ControlVM, command: Command) -> dict[str, Any]:
    step = program.steps[command.step]
    results = {name: rec.result for name, rec in vm.steps.items() if rec.status == "done"}

    def emit(name: str, payload: dict[str, Any]) -> None:
        vm.record(name, command.step, payload)

    def apply_ctx(key: str, value: Any) -> None:
        vm.ctx[key] = value

    def base(iteration: dict[str, Any]) -> dict[str, Any]:
        scope: dict[str, Any] = dict(results)
        scope.update(
            workload=vm.workload,
            ctx=vm.ctx,
            args=command.args,
            iter=iteration,
            execution_id=vm.execution_id,
        )
        return scope

    vm.record("step.started", command.step, {})
    if step.loop is None:
        outcome = run_pipeline(program, step, base({}), call_tool, emit, apply_ctx)
        if outcome.ok:
            return {"name": "step.done", "step": command.step, "data": {"result": outcome.result}}
        return {"name": "step.failed", "step": command.step, "data": {"error": outcome.error}}
    items = command.items or []
    iterator = step.loop["iterator"]
    best_effort = step.loop.get("failure_mode") == "best_effort"
    vm.record("loop.started", command.step, {"count": len(items)})
    collected: list[Any] = []
    failures = 0
    for index, item in enumerate(items):
        vm.record("loop.iteration.started", command.step, {"index": index})
        outcome = run_pipeline(
            program, step, base({iterator: item, "index": index}), call_tool, emit, apply_ctx
        )
        if outcome.ok:
            vm.record("loop.iteration.done", command.step, {"index": index})
            collected.append(outcome.result)
            continue
        vm.record("loop.iteration.failed", command.step, {"index": index, "error": outcome.error})
        failures += 1
        if not best_effort:
            return {"name": "step.failed", "step": command.step, "data": {"error": outcome.error}}
        collected.append(None)
    data = {"result": collected, "count": len(items), "failed": failures}
    return {"name": "loop.done", "step": command.step, "data": data}


def summary(vm: ControlVM) -> dict[str, Any]:
    return {
        "execution_id": vm.execution_id,
        "status": vm.status,
        "steps": {
            name: {"runs": rec.runs, "status": rec.status, "result": rec.result}
            for name, rec in vm.steps.items()
        },
        "ctx": vm.ctx,
        "events": len(vm.events),
        "error": vm.error if vm.status == "failed" else None,
    }
