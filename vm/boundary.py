"""A step's result: a loop iteration's (collected in input order; a failure under fail_fast
cancels the rest, `stop_when` ends the loop early, racing ctx writes of parallel iterations
fail the step), a step's or a whole loop's (`_finish`, `_boundary`: the boundary event that
routes it), a listener's event. `_boundary` is the table interpreter's general path; a plain
step's `step.done` is decided by its plan (`_done_planned`) until the step is hot, then by the
handler generated for it (vm/specialise.py): all three decide the same.
"""

from __future__ import annotations

from typing import Any

from noetlc.ir.events import EventName
from noetlc.vm.admission import Admission
from noetlc.vm.control_state import (
    LoopRun,
    StepRecord,
    StepRun,
    Token,
    arc_output,
    loop_result,
    racing_write,
)
from noetlc.vm.loop_results import truncated
from noetlc.vm.protocol import Command, CommandKind, Event
from noetlc.vm.tables import DonePlan, first_passing

_CANCEL = CommandKind.CANCEL.value
_LOOP_DONE = EventName.LOOP_DONE.value
_LOOP_ITERATION_DONE = EventName.LOOP_ITERATION_DONE.value
_NEXT_SELECTED = EventName.NEXT_SELECTED.value
_SIGNAL_RECEIVED = EventName.SIGNAL_RECEIVED.value
_STEP_DONE = EventName.STEP_DONE.value
_STEP_FAILED = EventName.STEP_FAILED.value


class Boundary(Admission):
    """Results and boundary events (see the module doc)."""

    __slots__ = ()

    results: dict[str, Any]
    final_result: Any

    def _iteration_result(
        self, run: StepRun, event: Event, data: dict[str, Any], commands: list[Command]
    ) -> None:
        index = event.iteration
        if index not in run.in_flight or not isinstance(run, LoopRun):
            return  # duplicate (a run that is not a loop has no iteration in flight)
        assert isinstance(index, int)
        run.in_flight.discard(index)
        run.done += 1
        self.firings += 1
        if event.name == _LOOP_ITERATION_DONE:
            run.results[index] = data.get("result")
        else:
            run.failures += 1
            run.results[index] = None  # its slot is set: a chunk of results completes
            if not run.best_effort:
                # fail_fast: the remaining iterations are cancelled, the step fails
                for other in sorted(run.in_flight):
                    commands.append(self._command(_CANCEL, run, other))
                error = data.get("error") or {"type": "IterationFailed", "message": "failed"}
                self.record(
                    _STEP_FAILED, run.step, {"error": error, "iteration": index}, run.run_id
                )
                self._finish(run, _STEP_FAILED, None, error, commands)
                return
        table = self.tables[run.step]
        if (
            table.stop_when is not None
            and run.done < len(run.items)
            and table.stop_when(self._scope(run.args, None))
        ):
            # the loop ends early: the iterations in flight are cancelled
            for other in sorted(run.in_flight):
                commands.append(self._command(_CANCEL, run, other))
            run.in_flight.clear()
            run.results = truncated(run.results, run.next_index)
            self._loop_done(run, commands, stopped=index)
            return
        if run.done == len(run.items):
            self._loop_done(run, commands)
        else:
            self._fill_slots(run, table, commands)

    def _conflicting_writes(
        self, run: LoopRun, index: int, writes: Any, commands: list[Command]
    ) -> bool:
        """Racing ctx writes of parallel iterations (`racing_write`) fail the step."""
        error = racing_write(run, index, writes)
        if error is None:
            return False
        run.in_flight.discard(index)
        for other in sorted(run.in_flight):
            commands.append(self._command(_CANCEL, run, other))
        self.record(_STEP_FAILED, run.step, {"error": error, "iteration": index}, run.run_id)
        self._finish(run, _STEP_FAILED, None, error, commands)
        return True

    def _loop_done(self, run: LoopRun, commands: list[Command], stopped: int | None = None) -> None:
        data: dict[str, Any] = {"count": len(run.items), "failed": run.failures}
        if stopped is not None:
            data["stopped_after"] = stopped
        self.record(_LOOP_DONE, run.step, data, run.run_id)
        self._finish(run, _LOOP_DONE, loop_result(run), None, commands)

    def _finish(
        self,
        run: StepRun,
        name: str,
        result: Any,
        error: dict[str, Any] | None,
        commands: list[Command],
    ) -> None:
        del self.runs[run.run_id]
        self.firings += 1  # the net's complete / fail / loop_done transition
        self._boundary(run, name, result, error, commands)

    def _boundary(
        self,
        run: StepRun,
        name: str,
        result: Any,
        error: dict[str, Any] | None,
        commands: list[Command],
    ) -> None:
        """Route a finished step: its boundary event decides the arcs."""
        step = run.step
        table = self.tables[step]
        record = self.steps[step]
        scope = self.scope
        if name == _STEP_FAILED:
            record.status = "failed"
            data: dict[str, Any] = {"error": error}
            routes = table.failed_on.get(name, ())
        else:
            record.status = "done"
            record.result = result
            self.results[step] = result
            scope[step] = result
            self.final_result = result
            data = {"result": result}
            if name == _LOOP_DONE:
                data.update(count=len(run.items), failed=run.failures)
            routes = table.done_on.get(name, ())
        scope["args"] = run.args
        scope["event"] = {"name": name, "step": step, "data": data}
        scope["output"] = arc_output(result, (error or {}) if name == _STEP_FAILED else None)
        self._route(run, table, routes, name, scope, error)

    def _done_planned(
        self, run: StepRun, plan: DonePlan, result: Any, commands: list[Command]
    ) -> None:
        """`_boundary` + `_route` of a plain step's `step.done` as its plan says
        (`tables.DonePlan`), for a step not hot yet (vm/specialise.py generates the same as
        code): the same state, events, guard evaluations and firings. The ready queue is
        empty here (`step` drains it), so a single token enters its step at once, as the
        queue would have it next."""
        step = run.step
        record = self.steps[step]
        record.status = "done"
        record.result = result
        self.results[step] = result
        scope = self.scope
        scope[step] = result
        self.final_result = result
        scope["args"] = args = run.args
        scope["event"] = {"name": _STEP_DONE, "step": step, "data": {"result": result}}
        scope["output"] = arc_output(result, None)
        guard, taken, target, otherwise, otherwise_target = plan
        if guard is not None and not guard(scope):
            if otherwise is None:
                return
            taken, target = otherwise, otherwise_target
        self.firings += 1
        if taken.kind != "route":
            return  # an end transition
        if taken.args is not None:
            args = self.program.value(taken.args, scope)
        if not args and type(args) is not dict:
            args = {}
        self.record(_NEXT_SELECTED, step, {"to": taken.id}, run.run_id)
        ready = self.ready
        if target is None or ready:
            for _, entry in taken.entries:
                ready.append((entry, Token(args, False, step)))  # type: ignore[arg-type]
            return
        if target.plain_rule is None:
            self._enter(target, Token(args, False, step), commands)
            return
        # `_enter` of a plain step (`StepTable.plain_rule`): its one rule admits the token
        entering = target.name
        if self.dead_arrivals:
            self.dead_arrivals.pop(entering, None)
        scope["args"] = args
        del scope["event"]
        del scope["output"]
        self.firings += 1
        entered = self.steps.get(entering)
        if entered is None:
            entered = self.steps[entering] = StepRecord()
        entered.runs += 1
        entered.status = "running"
        self.step_runs += 1
        if self.step_runs > self._max_step_runs > 0:
            self._over("step_runs", self.step_runs, self._max_step_runs)
        run_id = f"{entering}#{entered.runs}"
        self.runs[run_id] = StepRun(entering, run_id, args)
        self._schedule(entering, run_id, args, commands)

    def _listener_event(self, run: StepRun, event: Event, commands: list[Command]) -> bool:
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
        scope = self._scope(run.args, guard_event)
        table = self.tables[run.step]
        routes = tuple(t for t in table.done_routes if t.kind == "route" and name in t.events)
        if first_passing(routes, scope) is None:
            return False
        del self.listeners[run.run_id]
        if run.run_id in self.timers:
            self.timers.discard(run.run_id)
            commands.append(self._command(_CANCEL, run, None))
        record = self.steps[run.step]
        record.status = "done"
        record.result = data
        self.results[run.step] = data
        self.scope[run.step] = data
        self.final_result = data
        self.record(_STEP_DONE, run.step, {"event": name}, run.run_id)
        self._route(run, table, routes, name, scope, None)
        return True

    def _scope(self, args: dict[str, Any], event: dict[str, Any] | None) -> dict[str, Any]:
        """The one scope of the control VM, updated in place (evaluation is sequential)."""
        scope = self.scope
        scope["args"] = args
        scope.pop("output", None)  # a step's own (`arc_output`), not a listener's
        if event is None:
            scope.pop("event", None)
        else:
            scope["event"] = event
        return scope

    # ------------------------------------------------------------------ completion
