"""Admission: a token at a step's entry. The admission rules decide at once (start, skip, or
no rule fired); a started step is scheduled (a `run` command), a loop step issues its first
iterations (at most `slots` in flight), a listener waits (with its timer). The commands the
VM issues are built here, as drafts (`protocol.CommandDraft`) whose action ids are computed
when first read. Functions of the VM's state (`ControlState`, vm/control_state.py) over
routing (vm/routing.py); vm/boundary.py and `ControlVM` (vm/control.py) build on them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from noetlc.expr import undefined
from noetlc.expr.runtime import ExpressionError
from noetlc.ir.events import EventName
from noetlc.vm.control_state import ControlState, LoopRun, StepRecord, StepRun
from noetlc.vm.joins import Token
from noetlc.vm.loop_results import new_results
from noetlc.vm.protocol import Command, CommandDraft, CommandKind
from noetlc.vm.routing import announce_dead, apply_writes, finish, loop_done
from noetlc.vm.tables import DecodedTransition, StepTable, first_passing

__all__ = [
    "admit",
    "command_for",
    "drain",
    "enter",
    "expression_failure",
    "fill_slots",
    "loop_width",
    "new_command",
    "run_command",
    "schedule",
    "timer_command",
]

_LOOP_ITERATION_STARTED = EventName.LOOP_ITERATION_STARTED.value
_LOOP_STARTED = EventName.LOOP_STARTED.value
_STEP_FAILED = EventName.STEP_FAILED.value
_STEP_SCHEDULED = EventName.STEP_SCHEDULED.value
_STEP_SKIPPED = EventName.STEP_SKIPPED.value
_STEP_STARTED = EventName.STEP_STARTED.value
_RUN = CommandKind.RUN.value
_TIMER = CommandKind.TIMER.value


def drain(vm: ControlState, commands: list[Command]) -> None:
    ready = vm.ready
    while ready and vm.status == "running":
        step, token = ready.popleft()
        admit(vm, step, token, commands)


def admit(vm: ControlState, step: str, token: Token, commands: list[Command]) -> None:
    table = vm.tables[step]
    if token.dead:
        if table.alternatives > 1:
            # a merge: dead only when every alternative is (one live arrival runs it)
            seen = vm.dead_arrivals.get(step, 0) + 1
            if seen < table.alternatives:
                vm.dead_arrivals[step] = seen
                return
            del vm.dead_arrivals[step]
        announce_dead(vm, table)
        return
    enter(vm, table, token, commands)


def enter(vm: ControlState, table: StepTable, token: Token, commands: list[Command]) -> None:
    """A live token at a step's entry: the admission decides at once."""
    step = table.name
    if vm.dead_arrivals:
        vm.dead_arrivals.pop(step, None)
    args = token.args
    scope = vm.scope  # admission rules see no event
    scope["args"] = args
    if "event" in scope:
        del scope["event"]
        scope.pop("output", None)
    rules = table.admission
    first = rules[0] if rules else None
    if first is not None and not first.guards and not first.earlier:
        transition: DecodedTransition | None = first  # unguarded: what first_passing returns
    else:
        transition = first_passing(rules, scope)
    if transition is None:
        vm.fail({"code": "NOE852", "message": f"no admission rule fired for {step}", "step": step})
        return
    vm.firings += 1
    record = vm.steps.get(step)
    if record is None:
        record = vm.steps[step] = StepRecord()
    if transition.skip:
        record.status = "skipped"
        vm.record(_STEP_SKIPPED, step, {"transition": transition.id})
        announce_dead(vm, table)
        return
    record.runs += 1
    record.status = "running"
    vm.step_runs += 1
    if vm.step_runs > vm._max_step_runs > 0:
        vm._over("step_runs", vm.step_runs, vm._max_step_runs)
    run_id = f"{step}#{record.runs}"
    run = StepRun(step, run_id, args) if table.loop is None else LoopRun(step, run_id, args)
    if transition.writes is not None:
        apply_writes(vm, transition.writes, scope)
    if table.listener:
        vm.listeners[run_id] = run
        vm.record(_STEP_STARTED, step, {"listener": True}, run_id)
        if table.listener_timeout is not None:
            vm.timers.add(run_id)
            commands.append(timer_command(vm, run))
        return
    vm.runs[run_id] = run
    if table.loop is None:
        schedule(vm, step, run_id, args, commands)
        return
    assert isinstance(run, LoopRun)  # a loop step's run (above)
    try:
        items = table.items(scope) if table.items is not None else []
    except ExpressionError as exc:  # the user's items expression: the step fails
        finish(vm, run, _STEP_FAILED, None, expression_failure(exc))
        return
    if isinstance(items, list | tuple | range):
        run.items = list(items)
    elif items is None or isinstance(items, undefined.Undefined):
        run.items = []
    else:
        error = {
            "type": "TypeError",
            "code": "NOE310",
            "message": f"the items of loop {step} must be a list, not {type(items).__name__}",
        }
        finish(vm, run, _STEP_FAILED, None, error)
        return
    run.results = new_results(len(run.items), vm.spill)
    run.best_effort = table.loop.get("failure_mode") == "best_effort"
    run.slots = table.slots
    if table.slots_from is not None:
        slots, width_error = loop_width(table.slots_from, scope, step)
        if width_error is not None:
            finish(vm, run, _STEP_FAILED, None, width_error)
            return
        run.slots = slots
    vm.firings += 1  # loop_start
    vm.record(_LOOP_STARTED, step, {"count": len(run.items)}, run_id)
    if not run.items:
        loop_done(vm, run)
        return
    fill_slots(vm, run, table, commands)


def fill_slots(vm: ControlState, run: LoopRun, table: StepTable, commands: list[Command]) -> None:
    while len(run.in_flight) < run.slots and run.next_index < len(run.items):
        index = run.next_index
        vm.iterations += 1
        if vm.iterations > vm.budgets["loop_iterations"] > 0:
            vm._over("loop_iterations", vm.iterations, vm.budgets["loop_iterations"])
        run.next_index += 1
        run.in_flight.add(index)
        vm.firings += 1
        vm.record(_LOOP_ITERATION_STARTED, run.step, {"index": index}, run.run_id, index)
        commands.append(run_command(vm, run, index))


def schedule(
    vm: ControlState, step: str, run_id: str, args: dict[str, Any], commands: list[Command]
) -> None:
    """A plain (not loop) run is scheduled: its event and its run command."""
    vm.record(_STEP_SCHEDULED, step, {"args": args}, run_id)
    commands.append(new_command(vm, _RUN, step, run_id, args, None, None))


def new_command(
    vm: ControlState,
    kind: str,
    step: str,
    run_id: str,
    args: dict[str, Any],
    iteration: int | None,
    item: Any,
) -> Command:
    """A command whose action id is computed when first read (`protocol.CommandDraft`)."""
    draft = CommandDraft()
    draft.kind = kind
    draft.step = step
    draft.step_run_id = run_id
    draft.args = args
    draft.action_id = None  # type: ignore[assignment]  # computed when first read
    draft._execution = vm.execution_id
    draft.iteration = iteration
    draft.item = item
    draft.delay = None
    draft.__class__ = Command  # type: ignore[assignment]  # filled in: a `Command` now
    return draft  # type: ignore[return-value]


def command_for(
    vm: ControlState, kind: str, run: StepRun, iteration: int | None, delay: float | None = None
) -> Command:
    """A command for an active run (one iteration of it, for a loop)."""
    draft = CommandDraft()  # `new_command`, inlined: one per iteration
    draft.kind = kind
    draft.step = run.step
    draft.step_run_id = run.run_id
    draft.args = run.args
    draft.action_id = None  # type: ignore[assignment]  # computed when first read
    draft._execution = vm.execution_id
    draft.iteration = iteration
    draft.item = run.items[iteration] if iteration is not None else None
    draft.delay = delay
    draft.__class__ = Command  # type: ignore[assignment]
    return draft  # type: ignore[return-value]


def run_command(vm: ControlState, run: StepRun, iteration: int | None) -> Command:
    return command_for(vm, _RUN, run, iteration)


def timer_command(vm: ControlState, run: StepRun) -> Command:
    return command_for(vm, _TIMER, run, None, vm.tables[run.step].listener_timeout)


def expression_failure(exc: ExpressionError) -> dict[str, Any]:
    """A step's error for an expression of the control VM that failed (items, writes)."""
    return {"type": exc.error_type, "code": exc.code, "message": str(exc)}


def loop_width(
    evaluate: Callable[[dict[str, Any]], Any], scope: dict[str, Any], step: str
) -> tuple[int, dict[str, Any] | None]:
    """(slots, None) from a loop's `max_in_flight` template, or (0, the step's error)."""
    try:
        value = evaluate(scope)
    except ExpressionError as exc:
        return 0, expression_failure(exc)
    try:
        slots = int(value)
    except (TypeError, ValueError):
        slots = 0
    if isinstance(value, bool) or slots < 1:
        message = f"`max_in_flight` of loop {step} must be a positive integer, not {value!r}"
        return 0, {"type": "TypeError", "code": "NOE310", "message": message}
    return slots, None
