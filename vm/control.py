"""The control VM: the token game over the control program.

`start()` and `step(event)` turn events into commands and do no I/O; anything that goes wrong
inside them becomes an execution failure, never an exception. The VM reacts only to *input
events* — a step's or an iteration's result from a worker, a signal, a timer, a cancel
request (`INPUT_SOURCES`) — and everything it decides is a function of those events in order,
so feeding an execution's recorded inputs to a fresh VM reproduces its marking, its server
events and its commands (replay, resume).

Tokens wait in join branch places; a step's entry is decided at once (admission). Loop steps
are orchestrated here: the VM issues one command per iteration, at most `slots` in flight
(`max_in_flight`; 1 for sequential loops), collects the results in input order and emits
`loop.done`. Dead tokens implement dead-path elimination for AND-joins: a step that will not
run (skipped, on a dead path, or failed with the failure handled) announces it to the joins
downstream.
"""

from __future__ import annotations

from typing import Any

from noetlc.expr.runtime import ExpressionError
from noetlc.vm.admission import command_for, drain, run_command, timer_command
from noetlc.vm.boundary import conflicting_writes, done_planned, iteration_result, listener_event
from noetlc.vm.budgets import OverBudget
from noetlc.vm.control_state import (
    ControlState,
    LoopRun,
    Resolve,
    StepRecord,
    StepRun,
    Token,
    action_id,
)
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.loop_results import Spill
from noetlc.vm.protocol import (
    RESULT_NAMES,
    AnswerDraft,
    Command,
    CommandKind,
    Event,
    EventName,
    VMAnswer,
    answer,
)
from noetlc.vm.routing import apply_ctx, route_boundary
from noetlc.vm.specialise import HOT, DoneHandler, done_handlers, heat

__all__ = ["ControlVM", "Resolve", "StepRecord", "StepRun", "Token", "action_id"]

_CANCEL = CommandKind.CANCEL.value
_EXECUTION_CANCELLED = EventName.EXECUTION_CANCELLED.value
_SIGNAL_RECEIVED = EventName.SIGNAL_RECEIVED.value
_STEP_DONE = EventName.STEP_DONE.value
_STEP_FAILED = EventName.STEP_FAILED.value
_TIMER_FIRED = EventName.TIMER_FIRED.value
_WORKFLOW_FINISHED = EventName.WORKFLOW_FINISHED.value
_WORKFLOW_STARTED = EventName.WORKFLOW_STARTED.value


class ControlVM(ControlState):
    """`start()` and `step(event)` each return a `VMAnswer`: the commands issued and the server
    events recorded. What the runtime lends the VM is given here, once: `keychain` (the
    templates' `keychain` namespace) and `resolve` (reference-first results: the body of a
    `{"$ref": ...}` to its value). `resolve` must not do I/O — the runtime loads the values
    of the references an input event carries before it feeds the event (runtime/driver.py),
    so guards evaluate the same way in the run and in every replay.

    The VM is its state (`ControlState`) with this interface; what it does with an event is
    in the functions of vm/boundary.py (a result), vm/routing.py (a boundary event's arcs)
    and vm/admission.py (a token at a step's entry), each given the state."""

    __slots__ = ("_hot", "_on_done")

    def __init__(
        self,
        program: LoadedProgram,
        workload: dict[str, Any],
        execution_id: str,
        *,
        keychain: dict[str, Any] | None = None,
        resolve: Resolve | None = None,
        specialise: int | None = HOT,
        spill: Spill | None = None,
    ) -> None:
        super().__init__(program, workload, execution_id, keychain, resolve, spill)
        # the generated `step.done` handlers (vm/specialise.py), shared by the program's VMs:
        # a step's is generated at its `specialise`-th completion (None: never, the table
        # interpreter alone — the reference the handlers are tested against)
        self._hot = specialise
        self._on_done: dict[str, DoneHandler] = (
            done_handlers(program) if specialise is not None else {}
        )

    # ------------------------------------------------------------------ interface

    def start(self) -> VMAnswer:
        commands: list[Command] = []
        try:
            self.record(_WORKFLOW_STARTED, None, {})
            self.ready.append((self.program.entry, Token({})))
            drain(self, commands)
            self._check_complete()
        except Exception as exc:  # a bug must not take the runtime down
            self._internal(exc, None)
        records = self._events
        self._events = []
        return answer(commands, records)

    def step(self, event: Event) -> VMAnswer:
        """Feed one input event; return the commands it causes and the events recorded."""
        commands: list[Command] = []
        if self.status != "running":
            return VMAnswer(commands, [])
        self.inputs += 1
        try:
            name = event.name
            if name == _STEP_DONE:
                data = event.payload or {}
                if "ctx_writes" in data:
                    self._result(event, data, commands)
                else:  # a step's result (the hot path)
                    run = self.runs.pop(event.step_run_id, None)  # type: ignore[arg-type]
                    if run is not None:  # else a late or duplicate result: ignored
                        # both count the net's complete transition
                        handler = self._on_done.get(run.step)
                        if handler is None:
                            self._done(run, data.get("result"), commands)
                        else:
                            records = handler(self, run, data.get("result"), commands)
                            if records is not None:
                                # the handler admitted the next run, nothing is ready and the
                                # events budget holds: what follows below has nothing to do;
                                # its events are those of `records`, one `RoutedRecord`
                                # (`_events` is still empty)
                                done = AnswerDraft()  # `protocol.answer`, inlined
                                done.commands = commands
                                done._records = records
                                done.events = None  # type: ignore[assignment]
                                done.__class__ = VMAnswer  # type: ignore[assignment]
                                return done  # type: ignore[return-value]
            elif name in RESULT_NAMES:
                self._result(event, event.payload or {}, commands)
            else:
                self._on_event(event, commands)
            ready = self.ready
            if ready:
                drain(self, commands)
            if not (self.runs or self.listeners or self.timers or ready):
                self._check_complete()
            count = self.event_count + self.inputs
            if count > self._max_events > 0 and self.status == "running":
                self._over("events", count, self._max_events)
        except Exception as exc:
            self._internal(exc, getattr(event, "step", None))
        draft = AnswerDraft()  # `protocol.answer`, inlined
        draft.commands = commands
        draft._records = self._events
        draft.events = None  # type: ignore[assignment]  # built when first read
        draft.__class__ = VMAnswer  # type: ignore[assignment]
        self._events = []
        return draft  # type: ignore[return-value]

    def _result(self, event: Event, data: dict[str, Any], commands: list[Command]) -> None:
        """A worker's result for an active step run (a step's or an iteration's) with its ctx
        writes, if any (`step.done` without any: `step`'s hot path)."""
        run_id = event.step_run_id
        run = self.runs.get(run_id)  # type: ignore[arg-type]
        if run is None:
            return  # a late or duplicate result: ignored
        name = event.name
        if self._ctx_writes(run, event, data.get("ctx_writes"), commands):
            return  # racing ctx writes of parallel iterations: the step failed
        if name == _STEP_DONE:
            del self.runs[run_id]  # type: ignore[arg-type]
            handler = self._on_done.get(run.step)  # both count the net's complete transition
            if handler is None:
                self._done(run, data.get("result"), commands)
            else:
                records = handler(self, run, data.get("result"), commands)
                if records is not None:
                    self._events.append(records)
        elif name == _STEP_FAILED:
            del self.runs[run_id]  # type: ignore[arg-type]
            self.firings += 1  # the net's fail transition
            route_boundary(self, run, name, None, data.get("error"))
        else:
            iteration_result(self, run, event, data, commands)

    def _done(self, run: StepRun, result: Any, commands: list[Command]) -> None:
        """`step.done` of a step without a generated handler: the net's complete transition,
        then the route. A step with a done plan gets its handler when it becomes hot
        (`specialise.heat`; the handler counts the complete transition itself); until then
        its plan decides (`boundary.done_planned`); any other step goes through the table
        interpreter."""
        if self._hot is not None:
            table = self.tables[run.step]
            plan = table.done_plan
            if plan is not None:
                handler = heat(self.program, table, self._hot)
                if handler is not None:
                    records = handler(self, run, result, commands)
                    if records is not None:
                        self._events.append(records)
                else:
                    self.firings += 1
                    done_planned(self, run, plan, result, commands)
                return
        self.firings += 1
        route_boundary(self, run, _STEP_DONE, result, None)

    def _ctx_writes(self, run: StepRun, event: Event, writes: Any, commands: list[Command]) -> bool:
        """Apply a result's ctx writes; True when they race the writes of another iteration
        of a parallel loop (`boundary.conflicting_writes`: the step failed, the result is not used).
        None or empty: nothing to apply."""
        if not writes:
            return False
        if (
            type(run) is LoopRun
            and event.iteration is not None
            and run.slots > 1
            and conflicting_writes(self, run, event.iteration, writes, commands)
        ):
            return True
        apply_ctx(self, writes)
        return False

    def finished(self) -> bool:
        return self.status != "running"

    def outstanding(self) -> list[Command]:
        """Commands issued and not answered yet (what a resumed runtime must run again)."""
        out: list[Command] = []
        for run in self.runs.values():
            if self.tables[run.step].loop is None:
                out.append(run_command(self, run, None))
            else:
                out.extend(run_command(self, run, i) for i in sorted(run.in_flight))
        for run_id in sorted(self.timers):
            run = self.listeners[run_id]
            out.append(timer_command(self, run))
        return out

    # ------------------------------------------------------------------ events

    def _on_event(self, event: Event, commands: list[Command]) -> None:
        """Any other input: a signal, a timer, a cancel request."""
        name = event.name
        if name == _SIGNAL_RECEIVED:
            for run_id in list(self.listeners):
                listener_event(self, self.listeners[run_id], event, commands)
        elif name == _TIMER_FIRED:
            run = self.listeners.get(event.step_run_id or "")
            if run is not None:
                self.timers.discard(run.run_id)
                if not listener_event(self, run, event, commands):
                    error = {"type": "Timeout", "message": f"listener {run.step} timed out"}
                    del self.listeners[run.run_id]
                    self.record(_STEP_FAILED, run.step, {"error": error}, run.run_id)
                    route_boundary(self, run, _STEP_FAILED, None, error)
        elif name == _EXECUTION_CANCELLED:
            self.status = "cancelled"
            self.error = {"code": "NOE855", "message": "the execution was cancelled", "step": None}
            for run in self.runs.values():
                iterations = sorted(run.in_flight) if self.tables[run.step].loop else [None]
                for i in iterations:
                    commands.append(command_for(self, _CANCEL, run, i))

    # ------------------------------------------------------------------ completion

    def _internal(self, exc: BaseException, step: str | None) -> None:
        if isinstance(exc, OverBudget):
            self.fail(exc.error)
            return
        if isinstance(exc, ExpressionError):  # a guard or a loop's items: the user's error
            self.fail({"code": exc.code, "message": str(exc), "step": step})
            return
        self.fail({"code": "NOE850", "message": f"{type(exc).__name__}: {exc}", "step": step})

    def _check_complete(self) -> None:
        if self.status != "running" or self.runs or self.listeners or self.timers or self.ready:
            return
        stuck = self.join_places.stuck()
        if stuck:
            joins = list(dict.fromkeys(p.split(".from.", 1)[0] for p in stuck))
            step = joins[0]
            self.fail(
                {
                    "code": "NOE854",
                    "message": f"deadlock: the join `{step}` can never fire",
                    "step": step,
                    "joins": joins,  # every join left waiting
                }
            )
            return
        self.status = "completed"
        self.record(_WORKFLOW_FINISHED, None, {"status": "completed"})
