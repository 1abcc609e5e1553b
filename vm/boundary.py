"""A worker's result, and the boundary event it makes: a loop iteration's (collected in input
order; a failure under fail_fast cancels the rest, `stop_when` ends the loop early, racing ctx
writes of parallel iterations fail the step), a plain step's `step.done` decided by its plan
(`done_planned`), a listener's event. vm/routing.py routes the boundary event
(`route_boundary`: the table interpreter's general path); a plain step's `step.done` is
decided by its plan until the step is hot, then by the handler generated for it
(vm/specialise.py): all three decide the same. Functions of the VM's state (`ControlState`,
vm/control_state.py).
"""

from __future__ import annotations

from typing import Any

from noetlc.ir.events import EventName
from noetlc.vm.admission import command_for, enter, fill_slots, schedule
from noetlc.vm.control_state import (
    ControlState,
    LoopRun,
    StepRecord,
    StepRun,
    arc_output,
    racing_write,
)
from noetlc.vm.joins import Token
from noetlc.vm.loop_results import truncated
from noetlc.vm.protocol import Command, CommandKind, Event
from noetlc.vm.routing import finish, loop_done, route
from noetlc.vm.tables import DonePlan, first_passing

__all__ = ["conflicting_writes", "done_planned", "iteration_result", "listener_event"]

_CANCEL = CommandKind.CANCEL.value
_LOOP_ITERATION_DONE = EventName.LOOP_ITERATION_DONE.value
_NEXT_SELECTED = EventName.NEXT_SELECTED.value
_SIGNAL_RECEIVED = EventName.SIGNAL_RECEIVED.value
_STEP_DONE = EventName.STEP_DONE.value
_STEP_FAILED = EventName.STEP_FAILED.value


def iteration_result(
    vm: ControlState, run: StepRun, event: Event, data: dict[str, Any], commands: list[Command]
) -> None:
    index = event.iteration
    if index not in run.in_flight or not isinstance(run, LoopRun):
        return  # duplicate (a run that is not a loop has no iteration in flight)
    assert isinstance(index, int)
    run.in_flight.discard(index)
    run.done += 1
    vm.firings += 1
    if event.name == _LOOP_ITERATION_DONE:
        run.results[index] = data.get("result")
    else:
        run.failures += 1
        run.results[index] = None  # its slot is set: a chunk of results completes
        if not run.best_effort:
            # fail_fast: the remaining iterations are cancelled, the step fails
            for other in sorted(run.in_flight):
                commands.append(command_for(vm, _CANCEL, run, other))
            error = data.get("error") or {"type": "IterationFailed", "message": "failed"}
            vm.record(_STEP_FAILED, run.step, {"error": error, "iteration": index}, run.run_id)
            finish(vm, run, _STEP_FAILED, None, error)
            return
    table = vm.tables[run.step]
    if (
        table.stop_when is not None
        and run.done < len(run.items)
        and table.stop_when(vm.scope_for(run.args, None))
    ):
        # the loop ends early: the iterations in flight are cancelled
        for other in sorted(run.in_flight):
            commands.append(command_for(vm, _CANCEL, run, other))
        run.in_flight.clear()
        run.results = truncated(run.results, run.next_index)
        loop_done(vm, run, stopped=index)
        return
    if run.done == len(run.items):
        loop_done(vm, run)
    else:
        fill_slots(vm, run, table, commands)


def conflicting_writes(
    vm: ControlState, run: LoopRun, index: int, writes: Any, commands: list[Command]
) -> bool:
    """Racing ctx writes of parallel iterations (`racing_write`) fail the step."""
    error = racing_write(run, index, writes)
    if error is None:
        return False
    run.in_flight.discard(index)
    for other in sorted(run.in_flight):
        commands.append(command_for(vm, _CANCEL, run, other))
    vm.record(_STEP_FAILED, run.step, {"error": error, "iteration": index}, run.run_id)
    finish(vm, run, _STEP_FAILED, None, error)
    return True


def done_planned(
    vm: ControlState, run: StepRun, plan: DonePlan, result: Any, commands: list[Command]
) -> None:
    """`route_boundary` + `route` of a plain step's `step.done` as its plan says
    (`tables.DonePlan`), for a step not hot yet (vm/specialise.py generates the same as
    code): the same state, events, guard evaluations and firings. The ready queue is
    empty here (`step` drains it), so a single token enters its step at once, as the
    queue would have it next."""
    step = run.step
    record = vm.steps[step]
    record.status = "done"
    record.result = result
    vm.results[step] = result
    scope = vm.scope
    scope[step] = result
    vm.final_result = result
    scope["args"] = args = run.args
    scope["event"] = {"name": _STEP_DONE, "step": step, "data": {"result": result}}
    scope["output"] = arc_output(result, None)
    guard, taken, target, otherwise, otherwise_target = plan
    if guard is not None and not guard(scope):
        if otherwise is None:
            return
        taken, target = otherwise, otherwise_target
    vm.firings += 1
    if taken.kind != "route":
        return  # an end transition
    if taken.args is not None:
        args = vm.program.value(taken.args, scope)
    if not args and type(args) is not dict:
        args = {}
    vm.record(_NEXT_SELECTED, step, {"to": taken.id}, run.run_id)
    ready = vm.ready
    if target is None or ready:
        for _, entry in taken.entries:
            ready.append((entry, Token(args, False, step)))  # type: ignore[arg-type]
        return
    if target.plain_rule is None:
        enter(vm, target, Token(args, False, step), commands)
        return
    # `enter` of a plain step (`StepTable.plain_rule`): its one rule admits the token
    entering = target.name
    if vm.dead_arrivals:
        vm.dead_arrivals.pop(entering, None)
    scope["args"] = args
    del scope["event"]
    del scope["output"]
    vm.firings += 1
    entered = vm.steps.get(entering)
    if entered is None:
        entered = vm.steps[entering] = StepRecord()
    entered.runs += 1
    entered.status = "running"
    vm.step_runs += 1
    if vm.step_runs > vm._max_step_runs > 0:
        vm._over("step_runs", vm.step_runs, vm._max_step_runs)
    run_id = f"{entering}#{entered.runs}"
    vm.runs[run_id] = StepRun(entering, run_id, args)
    schedule(vm, entering, run_id, args, commands)


def listener_event(vm: ControlState, run: StepRun, event: Event, commands: list[Command]) -> bool:
    data = event.payload or {}
    name = event.name
    guard_event: dict[str, Any] = {"name": name, "step": run.step, "data": data}
    if name == _SIGNAL_RECEIVED:
        # a signal keeps the name it was sent with (`message.received`), its data is the data
        guard_event = {
            "name": data.get("name", name),
            "step": run.step,
            "data": data.get("data"),
        }
    scope = vm.scope_for(run.args, guard_event)
    table = vm.tables[run.step]
    routes = tuple(t for t in table.done_routes if t.kind == "route" and name in t.events)
    if first_passing(routes, scope) is None:
        return False
    del vm.listeners[run.run_id]
    if run.run_id in vm.timers:
        vm.timers.discard(run.run_id)
        commands.append(command_for(vm, _CANCEL, run, None))
    record = vm.steps[run.step]
    record.status = "done"
    record.result = data
    vm.results[run.step] = data
    vm.scope[run.step] = data
    vm.final_result = data
    vm.record(_STEP_DONE, run.step, {"event": name}, run.run_id)
    route(vm, run, table, routes, name, scope, None)
    return True
