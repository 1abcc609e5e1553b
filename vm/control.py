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
from hashlib import sha256 as _sha256
from typing import Any

from jinja2 import Undefined

from noetlc.expr.runtime import RESOLVER_KEY, ExpressionError
from noetlc.vm.budgets import OverBudget, budgets_of
from noetlc.vm.control_state import (
    LoopRun,
    StepRecord,
    StepRun,
    Token,
    action_id,
    loop_result,
    racing_write,
)
from noetlc.vm.joins import JoinPlaces
from noetlc.vm.program import Program
from noetlc.vm.protocol import (
    RESULT_NAMES,
    Command,
    CommandKind,
    Event,
    EventName,
    Source,
    Step,
)
from noetlc.vm.routing import Routing
from noetlc.vm.tables import DonePlan, StepTable, Transition, build_tables, first_passing

_EXECUTION_CANCELLED = EventName.EXECUTION_CANCELLED.value
_LOOP_ITERATION_STARTED = EventName.LOOP_ITERATION_STARTED.value
_LOOP_STARTED = EventName.LOOP_STARTED.value
_STEP_SKIPPED = EventName.STEP_SKIPPED.value
_STEP_STARTED = EventName.STEP_STARTED.value
_WORKFLOW_FINISHED = EventName.WORKFLOW_FINISHED.value
_WORKFLOW_STARTED = EventName.WORKFLOW_STARTED.value

__all__ = ["ControlVM", "Resolve", "StepRecord", "StepRun", "Token", "action_id"]

# the body of a `{"$ref": ...}` -> the value it refers to, from memory (no I/O: see __init__)
Resolve = Callable[[dict[str, Any]], Any]

_STEP_DONE = EventName.STEP_DONE.value
_STEP_FAILED = EventName.STEP_FAILED.value
_LOOP_DONE = EventName.LOOP_DONE.value
_LOOP_ITERATION_DONE = EventName.LOOP_ITERATION_DONE.value
_NEXT_SELECTED = EventName.NEXT_SELECTED.value
_STEP_SCHEDULED = EventName.STEP_SCHEDULED.value
_SIGNAL_RECEIVED = EventName.SIGNAL_RECEIVED.value
_TIMER_FIRED = EventName.TIMER_FIRED.value
_RUN = CommandKind.RUN.value
_SERVER = Source.SERVER.value
_new = tuple.__new__  # Command and Step without their Python-level __new__ (the hot path)
_CANCEL = CommandKind.CANCEL.value


class ControlVM(Routing):
    """`start()` and `step(event)` each return a `Step`: the commands issued and the server
    events recorded. What the runtime lends the VM is given here, once: `keychain` (the
    templates' `keychain` namespace) and `resolve` (reference-first results: the body of a
    `{"$ref": ...}` to its value). `resolve` must not do I/O — the runtime loads the values
    of the references an input event carries before it feeds the event (runtime/driver.py),
    so guards evaluate the same way in the run and in every replay."""

    def __init__(
        self,
        program: Program,
        workload: dict[str, Any],
        execution_id: str,
        *,
        keychain: dict[str, Any] | None = None,
        resolve: Resolve | None = None,
    ) -> None:
        self.program = program
        self.tables: dict[str, StepTable] = build_tables(program)
        self.workload = workload
        self.execution_id = execution_id
        # `action_id`'s hash with the execution id already fed in: each command's id copies it
        self._action_prefix = _sha256(f"{execution_id}/".encode())
        self.ctx: dict[str, Any] = {}
        self.results: dict[str, Any] = {}  # finished steps by name
        # step results by name plus the namespaces: what guards and arc args see
        self.scope: dict[str, Any] = {
            "workload": workload,
            "ctx": self.ctx,
            "execution_id": execution_id,
        }
        if keychain is not None:
            self.scope["keychain"] = keychain
        if resolve is not None:
            self.scope[RESOLVER_KEY] = resolve
        self.steps: dict[str, StepRecord] = {}
        self._events: list[Event] = []  # server events of the current `Step`, in order
        self._event_prefix = f"{execution_id}:s"  # server event ids: EXECUTION:sN
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

    def start(self) -> Step:
        commands: list[Command] = []
        try:
            self.record(_WORKFLOW_STARTED, None, {})
            self.ready.append((self.program.entry, Token({})))
            self._drain(commands)
            self._check_complete()
        except Exception as exc:  # a bug must not take the runtime down
            self._internal(exc, None)
        return self._answer(commands)

    def _answer(self, commands: list[Command]) -> Step:
        events = self._events
        self._events = []
        return _new(Step, (commands, events))

    def step(self, event: Event) -> Step:
        """Feed one input event; return the commands it causes and the events recorded."""
        commands: list[Command] = []
        if self.status != "running":
            return _new(Step, (commands, []))
        self.inputs += 1
        try:
            name = event.name
            if name in RESULT_NAMES:
                # a worker's result for an active step run (inline: the hot path)
                run = self.runs.get(event.step_run_id or "")
                if run is not None:  # else a late or duplicate result: ignored
                    data = event.payload or {}
                    writes = data.get("ctx_writes")
                    if (
                        writes
                        and type(run) is LoopRun
                        and event.iteration is not None
                        and run.slots > 1
                        and self._conflicting_writes(run, event.iteration, writes, commands)
                    ):
                        pass  # racing ctx writes of parallel iterations: the step failed
                    else:
                        if writes:
                            self._apply_ctx(writes)
                        if name == _STEP_DONE:
                            del self.runs[run.run_id]
                            self.firings += 1  # the net's complete transition
                            plan = self.tables[run.step].done_plan
                            if plan is not None:
                                self._done_planned(run, plan, data.get("result"), commands)
                            else:
                                self._boundary(run, name, data.get("result"), None, commands)
                        elif name == _STEP_FAILED:
                            del self.runs[run.run_id]
                            self.firings += 1  # the net's fail transition
                            self._boundary(run, name, None, data.get("error"), commands)
                        else:
                            self._iteration_result(run, event, data, commands)
            else:
                self._on_event(event, commands)
            ready = self.ready
            while ready and self.status == "running":
                step, token = ready.popleft()
                self._admit(step, token, commands)
            if not (self.runs or self.listeners or self.timers or ready):
                self._check_complete()
            if self.event_count + self.inputs > self._max_events > 0 and self.status == "running":
                self._over("events", self.event_count + self.inputs, self._max_events)
        except Exception as exc:
            self._internal(exc, getattr(event, "step", None))
        events = self._events
        self._events = []
        return _new(Step, (commands, events))

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
        rules = table.admission
        first = rules[0] if rules else None
        if first is not None and not first.guards and not first.earlier:
            transition: Transition | None = first  # unguarded: what first_passing returns
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
        run = StepRun(step, run_id, token) if table.loop is None else LoopRun(step, run_id, token)
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
            self._finish(run, _STEP_FAILED, None, _expression_failure(exc), commands)
            return
        if isinstance(items, list | tuple | range):
            run.items = list(items)
        elif items is None or isinstance(items, Undefined):
            run.items = []
        else:
            error = {
                "type": "TypeError",
                "code": "NOE310",
                "message": f"the items of loop {step} must be a list, not {type(items).__name__}",
            }
            self._finish(run, _STEP_FAILED, None, error, commands)
            return
        run.results = [None] * len(run.items)
        run.best_effort = table.loop.get("failure_mode") == "best_effort"
        run.slots = table.slots
        if table.slots_from is not None:
            slots, error = _slots(table.slots_from, scope, step)
            if error is not None:
                self._finish(run, _STEP_FAILED, None, error, commands)
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
        self.event_count = n = self.event_count + 1
        self._events.append(
            _new(
                Event,
                (
                    _STEP_SCHEDULED,
                    _SERVER,
                    step,
                    run_id,
                    None,
                    {"args": args},
                    f"{self._event_prefix}{n}",
                    self.execution_id,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                ),
            )
        )  # `recorded`, inlined: one per step run
        commands.append(
            _new(
                Command, (_RUN, step, run_id, args, self._action_id(run_id, None), None, None, None)
            )
        )

    def _command(self, kind: str, run: StepRun, iteration: int | None) -> Command:
        return _new(
            Command,
            (
                kind,
                run.step,
                run.run_id,
                run.token.args,
                self._action_id(run.run_id, iteration),
                iteration,
                run.items[iteration] if iteration is not None else None,
                None,
            ),
        )

    def _action_id(self, step_run_id: str, iteration: int | None) -> str:
        """`action_id(self.execution_id, step_run_id, iteration)`, from the prefixed hash."""
        digest = self._action_prefix.copy()
        digest.update(f"{step_run_id}/{'' if iteration is None else iteration}".encode())
        return digest.hexdigest()[:32]

    def _run_command(self, run: StepRun, iteration: int | None) -> Command:
        return self._command(_RUN, run, iteration)

    def _timer_command(self, run: StepRun) -> Command:
        command = self._command(CommandKind.TIMER, run, None)
        return command._replace(delay=self.tables[run.step].listener_timeout)

    # ------------------------------------------------------------------ results

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
            and table.stop_when(self._scope(run.token.args, None))
        ):
            # the loop ends early: the iterations in flight are cancelled
            for other in sorted(run.in_flight):
                commands.append(self._command(_CANCEL, run, other))
            run.in_flight.clear()
            run.results = run.results[: run.next_index]
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
        scope["args"] = run.token.args
        scope["event"] = {"name": name, "step": step, "data": data}
        self._route(run, table, routes, name, scope, error)

    def _done_planned(
        self, run: StepRun, plan: DonePlan, result: Any, commands: list[Command]
    ) -> None:
        """`_boundary` + `_route` of a plain step's `step.done`, specialised at table-build
        time (`tables.DonePlan`): the same state, events, guard evaluations and firings. The
        ready queue is empty here (`step` drains it), so a single token enters its step at
        once, as the queue would have it next."""
        step = run.step
        record = self.steps[step]
        record.status = "done"
        record.result = result
        self.results[step] = result
        scope = self.scope
        scope[step] = result
        self.final_result = result
        scope["args"] = args = run.token.args
        scope["event"] = {"name": _STEP_DONE, "step": step, "data": {"result": result}}
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
        self.event_count = n = self.event_count + 1
        self._events.append(
            _new(
                Event,
                (
                    _NEXT_SELECTED,
                    _SERVER,
                    step,
                    run.run_id,
                    None,
                    {"to": taken.id},
                    f"{self._event_prefix}{n}",
                    self.execution_id,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                ),
            )
        )  # `recorded`, inlined: one per decision
        ready = self.ready
        if target is None or ready:
            for _, entry in taken.entries:
                ready.append((entry, Token(args, False, step)))  # type: ignore[arg-type]
            return
        token = Token(args, False, step)
        rules = target.admission
        if len(rules) != 1 or rules[0] is not target.plain_rule:
            self._enter(target, token, commands)
            return
        # `_enter` of a plain step (`StepTable.plain_rule`): its one rule admits the token
        entering = target.name
        if self.dead_arrivals:
            self.dead_arrivals.pop(entering, None)
        scope["args"] = args
        del scope["event"]
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
        self.runs[run_id] = StepRun(entering, run_id, token)
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
        scope = self._scope(run.token.args, guard_event)
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

    # ------------------------------------------------------------------ scopes and ctx

    def _scope(self, args: dict[str, Any], event: dict[str, Any] | None) -> dict[str, Any]:
        """The one scope of the control VM, updated in place (evaluation is sequential)."""
        scope = self.scope
        scope["args"] = args
        if event is None:
            scope.pop("event", None)
        else:
            scope["event"] = event
        return scope

    # ------------------------------------------------------------------ completion

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


def _expression_failure(exc: ExpressionError) -> dict[str, Any]:
    """A step's error for an expression of the control VM that failed (items, writes)."""
    return {"type": exc.error_type, "code": exc.code, "message": str(exc)}


def _slots(evaluate: Callable[[dict[str, Any]], Any], scope: dict[str, Any], step: str) -> Any:
    """(slots, None) from a loop's `max_in_flight` template, or (0, the step's error)."""
    try:
        value = evaluate(scope)
    except ExpressionError as exc:
        return 0, _expression_failure(exc)
    try:
        slots = int(value)
    except (TypeError, ValueError):
        slots = 0
    if isinstance(value, bool) or slots < 1:
        message = f"`max_in_flight` of loop {step} must be a positive integer, not {value!r}"
        return 0, {"type": "TypeError", "code": "NOE310", "message": message}
    return slots, None
