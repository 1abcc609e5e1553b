"""Admission: a token at a step's entry. The admission rules decide at once (start, skip, or
no rule fired); a started step is scheduled (a `run` command), a loop step issues its first
iterations (at most `slots` in flight), a listener waits (with its timer). The commands the
VM issues are built here; their action ids are lazy (`protocol.Command`).

`Admission` builds on `Routing` (vm/routing.py); `Boundary` (vm/boundary.py) and `ControlVM`
(vm/control.py) build on it.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any

from noetlc.expr import undefined
from noetlc.expr.runtime import ExpressionError
from noetlc.ir.events import EventName
from noetlc.vm.control_state import LoopRun, StepRecord, StepRun, Token
from noetlc.vm.loop_results import new_results
from noetlc.vm.protocol import Command, CommandKind
from noetlc.vm.routing import Routing
from noetlc.vm.tables import DecodedTransition, StepTable, first_passing

_LOOP_ITERATION_STARTED = EventName.LOOP_ITERATION_STARTED.value
_LOOP_STARTED = EventName.LOOP_STARTED.value
_STEP_FAILED = EventName.STEP_FAILED.value
_STEP_SCHEDULED = EventName.STEP_SCHEDULED.value
_STEP_SKIPPED = EventName.STEP_SKIPPED.value
_STEP_STARTED = EventName.STEP_STARTED.value
_RUN = CommandKind.RUN.value
_TIMER = CommandKind.TIMER.value


class Admission(Routing):
    """Admission, loops' slots and the commands (see the module doc)."""

    __slots__ = ()

    runs: dict[str, StepRun]
    listeners: dict[str, StepRun]
    timers: set[str]
    dead_arrivals: dict[str, int]
    step_runs: int
    iterations: int
    _max_step_runs: int
    _action_seed: Any  # `protocol.action_seed(execution_id)`

    @abstractmethod
    def _finish(
        self,
        run: StepRun,
        name: str,
        result: Any,
        error: dict[str, Any] | None,
        commands: list[Command],
    ) -> None:
        """A run ends with its terminal event (Boundary)."""

    @abstractmethod
    def _loop_done(self, run: LoopRun, commands: list[Command], stopped: int | None = None) -> None:
        """A loop's last iteration is in (Boundary)."""

    def _drain(self, commands: list[Command]) -> None:
        ready = self.ready
        while ready and self.status == "running":
            step, token = ready.popleft()
            self._admit(step, token, commands)

    def _admit(self, step: str, token: Token, commands: list[Command]) -> None:
        table = self.tables[step]
        if token.dead:
            if table.alternatives > 1:
                # a merge: dead only when every alternative is (one live arrival runs it)
                seen = self.dead_arrivals.get(step, 0) + 1
                if seen < table.alternatives:
                    self.dead_arrivals[step] = seen
                    return
                del self.dead_arrivals[step]
            self._announce_dead(table)
            return
        self._enter(table, token, commands)

    def _enter(self, table: StepTable, token: Token, commands: list[Command]) -> None:
        """A live token at a step's entry: the admission decides at once."""
        step = table.name
        if self.dead_arrivals:
            self.dead_arrivals.pop(step, None)
        args = token.args
        scope = self.scope  # admission rules see no event
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
            self._fail(
                {"code": "NOE852", "message": f"no admission rule fired for {step}", "step": step}
            )
            return
        self.firings += 1
        record = self.steps.get(step)
        if record is None:
            record = self.steps[step] = StepRecord()
        if transition.skip:
            record.status = "skipped"
            self.record(_STEP_SKIPPED, step, {"transition": transition.id})
            self._announce_dead(table)
            return
        record.runs += 1
        record.status = "running"
        self.step_runs += 1
        if self.step_runs > self._max_step_runs > 0:
            self._over("step_runs", self.step_runs, self._max_step_runs)
        run_id = f"{step}#{record.runs}"
        run = StepRun(step, run_id, args) if table.loop is None else LoopRun(step, run_id, args)
        if transition.writes is not None:
            self._apply_writes(transition.writes, scope)
        if table.listener:
            self.listeners[run_id] = run
            self.record(_STEP_STARTED, step, {"listener": True}, run_id)
            if table.listener_timeout is not None:
                self.timers.add(run_id)
                commands.append(self._timer_command(run))
            return
        self.runs[run_id] = run
        if table.loop is None:
            self._schedule(step, run_id, args, commands)
            return
        assert isinstance(run, LoopRun)  # a loop step's run (above)
        try:
            items = table.items(scope) if table.items is not None else []
        except ExpressionError as exc:  # the user's items expression: the step fails
            self._finish(run, _STEP_FAILED, None, expression_failure(exc), commands)
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
            self._finish(run, _STEP_FAILED, None, error, commands)
            return
        run.results = new_results(len(run.items), self.spill)
        run.best_effort = table.loop.get("failure_mode") == "best_effort"
        run.slots = table.slots
        if table.slots_from is not None:
            slots, width_error = loop_width(table.slots_from, scope, step)
            if width_error is not None:
                self._finish(run, _STEP_FAILED, None, width_error, commands)
                return
            run.slots = slots
        self.firings += 1  # loop_start
        self.record(_LOOP_STARTED, step, {"count": len(run.items)}, run_id)
        if not run.items:
            self._loop_done(run, commands)
            return
        self._fill_slots(run, table, commands)

    def _fill_slots(self, run: LoopRun, table: StepTable, commands: list[Command]) -> None:
        while len(run.in_flight) < run.slots and run.next_index < len(run.items):
            index = run.next_index
            self.iterations += 1
            if self.iterations > self.budgets["loop_iterations"] > 0:
                self._over("loop_iterations", self.iterations, self.budgets["loop_iterations"])
            run.next_index += 1
            run.in_flight.add(index)
            self.firings += 1
            self.record(_LOOP_ITERATION_STARTED, run.step, {"index": index}, run.run_id, index)
            commands.append(self._run_command(run, index))

    def _schedule(
        self, step: str, run_id: str, args: dict[str, Any], commands: list[Command]
    ) -> None:
        """A plain (not loop) run is scheduled: its event and its run command."""
        self.record(_STEP_SCHEDULED, step, {"args": args}, run_id)
        commands.append(self._new_command(_RUN, step, run_id, args, None, None))

    def _new_command(
        self,
        kind: str,
        step: str,
        run_id: str,
        args: dict[str, Any],
        iteration: int | None,
        item: Any,
    ) -> Command:
        """A command whose action id is computed when first read (`Command.action_id`)."""
        command = Command()
        command.kind = kind
        command.step = step
        command.step_run_id = run_id
        command.args = args
        command.action = self._action_seed
        command.iteration = iteration
        command.item = item
        command.delay = None
        return command

    def _command(self, kind: str, run: StepRun, iteration: int | None) -> Command:
        command = Command()  # `_new_command`, inlined: one per iteration
        command.kind = kind
        command.step = run.step
        command.step_run_id = run.run_id
        command.args = run.args
        command.action = self._action_seed
        command.iteration = iteration
        command.item = run.items[iteration] if iteration is not None else None
        command.delay = None
        return command

    def _run_command(self, run: StepRun, iteration: int | None) -> Command:
        return self._command(_RUN, run, iteration)

    def _timer_command(self, run: StepRun) -> Command:
        command = self._command(_TIMER, run, None)
        command.delay = self.tables[run.step].listener_timeout
        return command


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
