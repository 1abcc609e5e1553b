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

from collections import deque
from collections.abc import Callable
from typing import Any

from noetlc.expr.runtime import RESOLVER_KEY, ExpressionError
from noetlc.vm.boundary import Boundary
from noetlc.vm.budgets import OverBudget, budgets_of
from noetlc.vm.control_state import (
    LoopRun,
    StepRecord,
    StepRun,
    Token,
    action_id,
    job_namespace,
)
from noetlc.vm.joins import JoinPlaces
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.loop_results import Spill
from noetlc.vm.protocol import (
    RESULT_NAMES,
    Command,
    CommandKind,
    Event,
    EventName,
    VMAnswer,
    action_seed,
)
from noetlc.vm.specialise import HOT, DoneHandler, done_handlers, heat
from noetlc.vm.tables import StepTable, build_tables

__all__ = ["ControlVM", "Resolve", "StepRecord", "StepRun", "Token", "action_id"]

# the body of a `{"$ref": ...}` -> the value it refers to, from memory (no I/O: see __init__)
Resolve = Callable[[dict[str, Any]], Any]

_CANCEL = CommandKind.CANCEL.value
_EXECUTION_CANCELLED = EventName.EXECUTION_CANCELLED.value
_SIGNAL_RECEIVED = EventName.SIGNAL_RECEIVED.value
_STEP_DONE = EventName.STEP_DONE.value
_STEP_FAILED = EventName.STEP_FAILED.value
_TIMER_FIRED = EventName.TIMER_FIRED.value
_WORKFLOW_FINISHED = EventName.WORKFLOW_FINISHED.value
_WORKFLOW_STARTED = EventName.WORKFLOW_STARTED.value


class ControlVM(Boundary):
    """`start()` and `step(event)` each return a `VMAnswer`: the commands issued and the server
    events recorded. What the runtime lends the VM is given here, once: `keychain` (the
    templates' `keychain` namespace) and `resolve` (reference-first results: the body of a
    `{"$ref": ...}` to its value). `resolve` must not do I/O — the runtime loads the values
    of the references an input event carries before it feeds the event (runtime/driver.py),
    so guards evaluate the same way in the run and in every replay."""

    __slots__ = ()

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
        self.program = program
        # where a long loop's iteration results go in chunks (vm/loop_results.py); None: kept
        self.spill = spill
        self.tables: dict[str, StepTable] = build_tables(program)
        # the generated `step.done` handlers (vm/specialise.py), shared by the program's VMs:
        # a step's is generated at its `specialise`-th completion (None: never, the table
        # interpreter alone — the reference the handlers are tested against)
        self._hot = specialise
        self._on_done: dict[str, DoneHandler] = (
            done_handlers(program) if specialise is not None else {}
        )
        self.workload = workload
        self.execution_id = execution_id
        # `action_id`'s hash with the execution id already fed in: a command's lazy id copies it
        self._action_seed = action_seed(execution_id)
        self.ctx: dict[str, Any] = {}
        self.results: dict[str, Any] = {}  # finished steps by name
        # step results by name plus the namespaces: what guards and arc args see
        self.scope: dict[str, Any] = {
            "workload": workload,
            "ctx": self.ctx,
            "execution_id": execution_id,
            "job": job_namespace(execution_id),
        }
        if keychain is not None:
            self.scope["keychain"] = keychain
        if resolve is not None:
            self.scope[RESOLVER_KEY] = resolve
        self.steps: dict[str, StepRecord] = {}
        self._events: list[Any] = []  # server events of the current `VMAnswer` (records), in order
        self._stamp = (f"{execution_id}:s", execution_id)  # server event ids: EXECUTION:sN
        self.event_count = 0  # server events recorded so far (N of the last id)
        self.join_places = JoinPlaces(program.joins, program.join_kind, self._has_run)
        self.runs: dict[str, StepRun] = {}  # active step runs by step_run_id
        self.listeners: dict[str, StepRun] = {}  # waiting listener steps by step_run_id
        self.timers: set[str] = set()  # step_run_ids with a pending timer
        self.ready: deque[tuple[str, Token]] = deque()
        self.dead_arrivals: dict[str, int] = {}  # merges: dead alternatives seen so far
        self.error: dict[str, Any] | None = None
        self.status = "running"
        self.budgets = budgets_of(program.payload)
        self._max_events = self.budgets["events"]  # read on every step: attributes
        self._max_step_runs = self.budgets["step_runs"]
        self.inputs = 0  # input events fed (with `event_count`: the events budget)
        self.step_runs = 0
        self.iterations = 0
        self.ctx_size = 0
        self.ctx_sizes: dict[str, int] = {}
        self.firings = 0
        self.handled_failures = 0
        self.final_result: Any = None  # the result of the step that finished last

    # ------------------------------------------------------------------ interface

    def start(self) -> VMAnswer:
        commands: list[Command] = []
        try:
            self.record(_WORKFLOW_STARTED, None, {})
            self.ready.append((self.program.entry, Token({})))
            self._drain(commands)
            self._check_complete()
        except Exception as exc:  # a bug must not take the runtime down
            self._internal(exc, None)
        return self._answer(commands)

    def _answer(self, commands: list[Command]) -> VMAnswer:
        answer = VMAnswer()
        answer.commands = commands
        answer.records = self._events
        self._events = []
        return answer

    def step(self, event: Event) -> VMAnswer:
        """Feed one input event; return the commands it causes and the events recorded."""
        commands: list[Command] = []
        if self.status != "running":
            return VMAnswer.of(commands, [])
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
                                answer = VMAnswer()
                                answer.commands = commands
                                answer.records = records
                                return answer
            elif name in RESULT_NAMES:
                self._result(event, event.payload or {}, commands)
            else:
                self._on_event(event, commands)
            ready = self.ready
            if ready:
                self._drain(commands)
            if not (self.runs or self.listeners or self.timers or ready):
                self._check_complete()
            count = self.event_count + self.inputs
            if count > self._max_events > 0 and self.status == "running":
                self._over("events", count, self._max_events)
        except Exception as exc:
            self._internal(exc, getattr(event, "step", None))
        answer = VMAnswer()  # `_answer`, inlined
        answer.commands = commands
        answer.records = self._events
        self._events = []
        return answer

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
            self._boundary(run, name, None, data.get("error"), commands)
        else:
            self._iteration_result(run, event, data, commands)

    def _done(self, run: StepRun, result: Any, commands: list[Command]) -> None:
        """`step.done` of a step without a generated handler: the net's complete transition,
        then the route. A step with a done plan gets its handler when it becomes hot
        (`specialise.heat`; the handler counts the complete transition itself); until then
        its plan decides (`_done_planned`); any other step goes through the table
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
                    self._done_planned(run, plan, result, commands)
                return
        self.firings += 1
        self._boundary(run, _STEP_DONE, result, None, commands)

    def _ctx_writes(self, run: StepRun, event: Event, writes: Any, commands: list[Command]) -> bool:
        """Apply a result's ctx writes; True when they race the writes of another iteration
        of a parallel loop (`_conflicting_writes`: the step failed, the result is not used).
        None or empty: nothing to apply."""
        if not writes:
            return False
        if (
            type(run) is LoopRun
            and event.iteration is not None
            and run.slots > 1
            and self._conflicting_writes(run, event.iteration, writes, commands)
        ):
            return True
        self._apply_ctx(writes)
        return False

    def finished(self) -> bool:
        return self.status != "running"

    def outstanding(self) -> list[Command]:
        """Commands issued and not answered yet (what a resumed runtime must run again)."""
        out: list[Command] = []
        for run in self.runs.values():
            if self.tables[run.step].loop is None:
                out.append(self._run_command(run, None))
            else:
                out.extend(self._run_command(run, i) for i in sorted(run.in_flight))
        for run_id in sorted(self.timers):
            run = self.listeners[run_id]
            out.append(self._timer_command(run))
        return out

    # ------------------------------------------------------------------ events

    def _on_event(self, event: Event, commands: list[Command]) -> None:
        """Any other input: a signal, a timer, a cancel request."""
        name = event.name
        if name == _SIGNAL_RECEIVED:
            for run_id in list(self.listeners):
                self._listener_event(self.listeners[run_id], event, commands)
        elif name == _TIMER_FIRED:
            run = self.listeners.get(event.step_run_id or "")
            if run is not None:
                self.timers.discard(run.run_id)
                if not self._listener_event(run, event, commands):
                    error = {"type": "Timeout", "message": f"listener {run.step} timed out"}
                    del self.listeners[run.run_id]
                    self.record(_STEP_FAILED, run.step, {"error": error}, run.run_id)
                    self._boundary(run, _STEP_FAILED, None, error, commands)
        elif name == _EXECUTION_CANCELLED:
            self.status = "cancelled"
            self.error = {"code": "NOE855", "message": "the execution was cancelled", "step": None}
            for run in self.runs.values():
                iterations = sorted(run.in_flight) if self.tables[run.step].loop else [None]
                for i in iterations:
                    commands.append(self._command(_CANCEL, run, i))

    # ------------------------------------------------------------------ admission

    def counts(self) -> dict[str, int]:
        """What the budgets count, so far."""
        return {
            "events": self.event_count + self.inputs,
            "step_runs": self.step_runs,
            "loop_iterations": self.iterations,
            "ctx_size": self.ctx_size,
        }

    def _over(self, name: str, count: int, limit: int) -> None:
        raise OverBudget(name, count, limit, self.counts())

    def _internal(self, exc: BaseException, step: str | None) -> None:
        if isinstance(exc, OverBudget):
            self._fail(exc.error)
            return
        if isinstance(exc, ExpressionError):  # a guard or a loop's items: the user's error
            self._fail({"code": exc.code, "message": str(exc), "step": step})
            return
        self._fail({"code": "NOE850", "message": f"{type(exc).__name__}: {exc}", "step": step})

    def _check_complete(self) -> None:
        if self.status != "running" or self.runs or self.listeners or self.timers or self.ready:
            return
        stuck = self.join_places.stuck()
        if stuck:
            step = stuck[0].split(".from.", 1)[0]
            self._fail(
                {
                    "code": "NOE854",
                    "message": f"deadlock: the join `{step}` can never fire",
                    "step": step,
                }
            )
            return
        self.status = "completed"
        self.record(_WORKFLOW_FINISHED, None, {"status": "completed"})
