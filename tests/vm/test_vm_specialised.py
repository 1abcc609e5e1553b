"""Differential tests of the control VM's specialised path (vm/specialise.py: generated
`step.done` handlers) and of the done plans that decide a step until it is hot, against the
table interpreter alone (`ControlVM(specialise=None)`).

Both VMs are fed the same input events — results, failures, ctx writes, loop iterations,
timers, answered in an order drawn from a script — and must give the same answers (commands
with their action ids, args, items and delays; server events, materialized), the same firing
counts and the same marking (runs in flight, listeners, timers, join places, step records,
ctx, results). Replaying the recorded inputs into a fresh VM must reproduce them too. Programs:
hand-written shapes, every fixture playbook (conformance cases, examples, tests/vm/playbooks)
and generated structured workflows; scripts and workflows are also drawn by hypothesis."""

from __future__ import annotations

import functools
import importlib.util
import pickle
from dataclasses import FrozenInstanceError, fields, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from noetlc.compiler.pipeline import compile_file, compile_source
from noetlc.vm import specialise as specialise_module
from noetlc.vm.control import ControlVM, action_id
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.protocol import Command, Event, VMAnswer, materialize, recorded
from noetlc.vm.specialise import HOT, done_handlers, heat

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("vm_reference_test", HERE / "test_vm_reference.py")
assert _spec is not None and _spec.loader is not None
reference_test = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference_test)

SHAPES = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: shapes, path: t/shapes}
workload: {n: 3, limit: 2}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: count, args: {k: "{{ workload.n }}"}}]}
  - step: count
    tool: {kind: noop}
    next:
      spec: {mode: exclusive}
      arcs:
        - step: count
          when: "{{ (ctx.i | default(0)) < workload.n }}"
        - step: guarded
  - step: guarded
    tool: {kind: noop}
    next: {arcs: [{step: admitted, when: "{{ args.k | default(1) > 0 }}"}]}
  - step: admitted
    spec:
      policy:
        admit:
          rules:
            - when: "{{ (ctx.i | default(0)) > workload.limit }}"
              then: {allow: true}
            - else: {then: {allow: false}}
    tool: {kind: noop}
    next: {arcs: [{step: broken, when: "{{ event.data.result.ok }}"}]}
  - step: broken
    tool: {kind: noop}
    next: {arcs: [{step: finish, when: "{{ 1 // (ctx.zero | default(0)) }}"}]}
  - step: finish
    tool: {kind: noop}
    next: {arcs: [{step: last, args: {seen: "{{ event.data.result }}"}}]}
  - step: last
    tool: {kind: noop}
"""

FIXTURES = [p for p in reference_test.PLAYBOOKS if p.is_file()]
EXECUTION = "exec-specialised"


@functools.cache
def _compiled(text: str) -> dict[str, Any]:
    unit = compile_source(text, "t.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    assert unit.payload is not None
    return unit.payload


@functools.cache
def _fixture(path: Path) -> dict[str, Any]:
    unit = compile_file(str(path))
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    assert unit.payload is not None
    return unit.payload


def _commands(answer: VMAnswer) -> list[Any]:
    out = []
    for c in answer.commands:
        # the lazy id is `action_id`'s value
        assert c.action_id == action_id(EXECUTION, c.step_run_id, c.iteration)
        out.append((c.kind, c.step, c.step_run_id, c.iteration, c.action_id, c.args, c.item))
        out.append(c.delay)
    return out


def _state(vm: ControlVM) -> list[Any]:
    """The marking and everything the VM counts."""
    return [
        vm.status,
        vm.error,
        vm.firings,
        vm.event_count,
        vm.inputs,
        vm.step_runs,
        vm.iterations,
        vm.handled_failures,
        {
            k: (type(r).__name__, r.step, r.run_id, r.args, r.items, sorted(r.in_flight))
            for k, r in vm.runs.items()
        },
        sorted(vm.listeners),
        sorted(vm.timers),
        [(s, t.dead, t.source, t.args) for s, t in vm.ready],
        vm.dead_arrivals,
        {
            place: [(t.dead, t.source, t.args) for t in tokens]
            for place, tokens in vm.join_places.marking.items()
        },
        {k: (r.runs, r.status, r.result) for k, r in vm.steps.items()},
        vm.ctx,
        vm.results,
        vm.final_result,
        vm.ctx_size,
        {k: v for k, v in vm.scope.items() if k != "ctx"},  # what guards see (`event`, `args`)
    ]


def _outcome(step: str, run_id: str, iteration: int | None, draw: int) -> Event:
    """The worker's result for a run command, as the draw says: done with a result (and
    sometimes ctx writes), or failed."""
    loop = iteration is not None
    payload: dict[str, Any]
    if draw % 6 == 5:
        name = "loop.iteration.failed" if loop else "step.failed"
        payload = {"error": {"type": "Boom", "message": f"failed {draw}"}}
    else:
        name = "loop.iteration.done" if loop else "step.done"
        payload = {"result": {"v": draw % 10, "ok": draw % 2 == 0}}
    if draw % 7 == 3:
        payload["ctx_writes"] = [["i", draw % 4]]
    elif draw % 11 == 4:
        payload["ctx_writes"] = [["seen", {"append": draw % 3}]]
    return Event(name, "worker", step, run_id, iteration, payload)


def _run(
    payload: dict[str, Any], specialise: int | None, script: list[int]
) -> tuple[list[Any], list[Event]]:
    """Feed a VM the results the script draws, answering pending commands in the drawn order;
    returns the trace and the input events fed."""
    program = LoadedProgram(payload)
    vm = ControlVM(program, dict(program.workload), EXECUTION, specialise=specialise)
    answer = vm.start()
    trace: list[Any] = [_commands(answer), answer.events, _state(vm)]
    pending = list(answer.commands)
    inputs: list[Event] = []
    draws = iter(script)
    while pending and not vm.finished() and len(inputs) < 300:
        command = pending.pop(next(draws, 0) % len(pending))
        draw = next(draws, len(inputs))
        if command.kind == "cancel":
            pending = [
                c
                for c in pending
                if (c.step_run_id, c.iteration) != (command.step_run_id, command.iteration)
            ]
            continue
        if command.kind == "timer":
            event = Event("timer.fired", "timer", command.step, command.step_run_id)
        else:
            event = _outcome(command.step, command.step_run_id, command.iteration, draw)
        inputs.append(event)
        answer = vm.step(event)
        trace += [_commands(answer), answer.events, _state(vm)]
        pending.extend(answer.commands)
    return trace, inputs


def _replayed(payload: dict[str, Any], specialise: int | None, inputs: list[Event]) -> list[Any]:
    program = LoadedProgram(payload)
    vm = ControlVM(program, dict(program.workload), EXECUTION, specialise=specialise)
    answer = vm.start()
    trace: list[Any] = [_commands(answer), answer.events, _state(vm)]
    for event in inputs:
        answer = vm.step(event)
        trace += [_commands(answer), answer.events, _state(vm)]
    return trace


def _agree(payload: dict[str, Any], script: list[int]) -> None:
    """Generated handlers from the first completion (`specialise=1`), the default (a step's
    plan until its second completion, then its handler) and the table interpreter alone
    (`specialise=None`) answer alike; a replay of the inputs reproduces the run."""
    fast, inputs = _run(payload, 1, script)
    default, default_inputs = _run(payload, HOT, script)
    general, general_inputs = _run(payload, None, script)
    assert general_inputs == inputs == default_inputs
    assert fast == general
    assert default == general
    assert _replayed(payload, 1, inputs) == fast  # replay reproduces the run


SCRIPTS = [[], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] * 8, [5, 11, 3, 23, 17, 4, 0, 9] * 10]


@pytest.mark.parametrize("script", SCRIPTS, ids=["first", "mixed", "failures"])
def test_shapes_agree(script: list[int]) -> None:
    _agree(_compiled(SHAPES), script)
    program = LoadedProgram(_compiled(SHAPES))
    tables = ControlVM(program, {}, "x").tables
    planned = {name for name, table in tables.items() if heat(program, table, 1) is not None}
    assert {"start", "count", "guarded", "broken", "finish", "last"} <= planned
    assert set(done_handlers(program)) == planned
    assert ControlVM(program, {}, "x", specialise=None)._on_done == {}


def test_a_step_is_specialised_at_its_second_completion() -> None:
    """By default (`HOT`) a step that completes once is decided by the table interpreter
    and one that completes again gets its handler: in SHAPES only the `count` cycle."""
    program = LoadedProgram(_compiled(SHAPES))
    vm = ControlVM(program, dict(program.workload), EXECUTION)
    assert HOT == 2 and vm._on_done is done_handlers(program) and not vm._on_done
    pending = list(vm.start().commands)
    while pending and not vm.finished():
        command = pending.pop(0)
        if command.step == "count":
            vm.ctx["i"] = vm.ctx.get("i", 0) + 1
        event = Event("step.done", "worker", command.step, command.step_run_id, None, {})
        pending.extend(vm.step(event).commands)
    assert vm.steps["count"].runs == 3 and vm.steps["start"].runs == 1
    assert set(done_handlers(program)) == {"count"}


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
@pytest.mark.parametrize("script", SCRIPTS, ids=["first", "mixed", "failures"])
def test_fixture_programs_agree(path: Path, script: list[int]) -> None:
    _agree(_fixture(path), script)


@pytest.mark.parametrize("seed", range(0, 300, 7))
def test_generated_workflows_agree(seed: int) -> None:
    _agree(_compiled(reference_test._generate(seed)), [seed, seed * 3, seed + 5, 7] * 20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 299), script=st.lists(st.integers(0, 10_000), max_size=120))
def test_drawn_workflows_and_schedules_agree(seed: int, script: list[int]) -> None:
    _agree(_compiled(reference_test._generate(seed)), script)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    index=st.integers(0, max(0, len(FIXTURES) - 1)),
    script=st.lists(st.integers(0, 10_000), max_size=120),
)
def test_drawn_schedules_of_fixtures_agree(index: int, script: list[int]) -> None:
    _agree(_fixture(FIXTURES[index]), script)


CYCLE = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: cycle, path: t/cycle}
executor: {spec: {budgets: {events: EVENTS, step_runs: RUNS}}}
workload: {n: 50}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: count}]}
  - step: count
    tool: {kind: noop}
    next:
      spec: {mode: exclusive}
      arcs:
        - step: count
          when: "{{ (ctx.i | default(0)) < workload.n }}"
        - step: end
  - step: end
    tool: {kind: noop}
"""


@pytest.mark.parametrize(
    ("events", "runs", "budget"),
    [(0, 0, None), (23, 0, "events"), (24, 0, "events"), (0, 9, "step_runs"), (0, 60, None)],
)
def test_budgets_end_a_hot_cycle_where_the_interpreter_ends_it(
    events: int, runs: int, budget: str | None
) -> None:
    """A cycle decided by its generated handler goes over the events or the step_runs budget
    at the same event as the table interpreter (the handler checks both itself: `step` does
    nothing after a handler that admitted its next run)."""
    payload = _compiled(CYCLE.replace("EVENTS", str(events)).replace("RUNS", str(runs)))
    ends = []
    for specialise in (1, HOT, None):
        program = LoadedProgram(payload)
        vm = ControlVM(program, dict(program.workload), EXECUTION, specialise=specialise)
        pending = list(vm.start().commands)
        trace: list[Any] = []
        while pending and not vm.finished():
            command = pending.pop()
            if command.step == "count":
                vm.ctx["i"] = vm.ctx.get("i", 0) + 1
            event = Event("step.done", "worker", command.step, command.step_run_id, None, {})
            answer = vm.step(event)
            trace += [_commands(answer), answer.events, _state(vm)]
            pending.extend(answer.commands)
        assert (vm.error or {}).get("budget") == budget
        assert vm.status == ("completed" if budget is None else "failed")
        ends.append(trace)
    assert ends[0] == ends[1] == ends[2]


def test_run_numbers_past_the_table_are_formatted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The handlers look the decimal text of a run number up in their table and format it
    past the table's end: the same run ids either way (a table of 5 here, so the cycle goes
    past it)."""
    monkeypatch.setitem(specialise_module._GLOBALS, "_digits", ["0", "1", "2", "3", "4"])
    payload = _compiled(CYCLE.replace("EVENTS", "0").replace("RUNS", "0"))
    traces = []
    for hot in (1, None):
        program = LoadedProgram(payload)
        vm = ControlVM(program, dict(program.workload), EXECUTION, specialise=hot)
        pending = list(vm.start().commands)
        trace: list[Any] = []
        while pending and not vm.finished():
            command = pending.pop()
            if command.step == "count":
                vm.ctx["i"] = vm.ctx.get("i", 0) + 1
            event = Event("step.done", "worker", command.step, command.step_run_id, None, {})
            answer = vm.step(event)
            trace += [_commands(answer), answer.events, _state(vm)]
            pending.extend(answer.commands)
        assert vm.status == "completed" and vm.steps["count"].runs == 50
        traces.append(trace)
        if hot is not None:  # the cycle's handler decided its runs past the table's 5
            assert 5 in done_handlers(program)["count"].__code__.co_consts
    assert traces[0] == traces[1]


def test_events_are_built_when_read() -> None:
    """A `VMAnswer` keeps the compact records of the generated handlers until `events` is read;
    the events built are the envelopes `recorded` makes (ids `EXECUTION:sN`, source server),
    in order with the events the table interpreter recorded as such."""
    program = LoadedProgram(_compiled(SHAPES))
    vm = ControlVM(program, dict(program.workload), EXECUTION, specialise=1)
    answer = vm.start()  # the table interpreter: events
    assert all(type(r) is Event for r in answer._records)
    assert answer.events == [
        recorded(f"{EXECUTION}:s1", EXECUTION, "workflow.started", None, None, None, {}),
        recorded(f"{EXECUTION}:s2", EXECUTION, "step.scheduled", "start", "start#1", None,
                 {"args": {}}),
    ]  # fmt: skip
    commands, unpacked = answer
    assert commands is answer.commands and unpacked is answer.events
    done = Event("step.done", "worker", "start", "start#1", None, {"result": None})
    answer = vm.step(done)  # a generated handler: one record of two events
    assert [type(r) for r in answer._records] == [tuple]
    events = answer.events
    assert events is answer.events and answer._records == events
    [selected, scheduled] = events
    assert selected == recorded(
        f"{EXECUTION}:s3", EXECUTION, "next.selected", "start", "start#1", None,
        {"to": "start->count#0"},
    )  # fmt: skip
    assert scheduled == recorded(
        f"{EXECUTION}:s4", EXECUTION, "step.scheduled", "count", "count#1", None,
        {"args": {"k": 3}},
    )  # fmt: skip
    stamp = ("p:", "e")
    mixed: list[Any] = [
        selected,
        ("step.skipped", "s", None, None, {"transition": "t"}, 9, stamp),
        ("a", "a#1", "a->b#0", "b", "b#2", {"x": 1}, 11, stamp),  # a `RoutedRecord`
    ]
    materialize(mixed)
    assert mixed[0] is selected and mixed[1].event_id == "p:9"
    assert mixed[1].payload == {"transition": "t"}
    assert mixed[2:] == [
        recorded("p:10", "e", "next.selected", "a", "a#1", None, {"to": "a->b#0"}),
        recorded("p:11", "e", "step.scheduled", "b", "b#2", None, {"args": {"x": 1}}),
    ]


def test_a_handler_that_did_everything_answers_its_one_record_bare() -> None:
    """`ControlVM.step` hands the one `RoutedRecord` of a generated handler that admitted the
    next run over as the answer's `records` (no list); `events` builds its two events."""
    program = LoadedProgram(_compiled(CYCLE.replace("EVENTS", "0").replace("RUNS", "0")))
    vm = ControlVM(program, dict(program.workload), EXECUTION, specialise=1)
    [command] = vm.start().commands
    bare = []
    for _ in range(3):
        answer = vm.step(Event("step.done", "worker", command.step, command.step_run_id))
        [command] = answer.commands
        bare.append(type(answer._records) is tuple)
        events = answer.events
        assert answer._records is events and [e.name for e in events] == [
            "next.selected",
            "step.scheduled",
        ]
    assert bare == [False, False, True]  # start, the first count (generated then), count
    assert events[1] == recorded(
        f"{EXECUTION}:s8", EXECUTION, "step.scheduled", "count", "count#3", None, {"args": {}}
    )


def test_action_ids_are_computed_once_and_keep_their_value() -> None:
    program = LoadedProgram(_compiled(SHAPES))
    [command] = ControlVM(program, {}, EXECUTION).start().commands
    slot = Command.__dict__["action_id"].slot  # the VM leaves it None: not hashed until read
    assert slot.__get__(command) is None
    assert type(command) is Command
    assert command.action_id == action_id(EXECUTION, "start#1", None)
    assert slot.__get__(command) == command.action_id  # computed once, then kept
    assert command.key() == ("run", "start", "start#1", None, command.action_id)
    copy = replace(command, delay=2.5)
    assert copy.delay == 2.5 and copy.action_id == command.action_id and copy != command
    assert replace(copy, delay=None) == command
    # a plain frozen value: built from its fields, pickled, compared
    built = Command(**{f.name: getattr(copy, f.name) for f in fields(Command) if f.init})
    assert pickle.loads(pickle.dumps(copy)) == copy == built
    assert VMAnswer([copy], []) == VMAnswer([replace(command, delay=2.5)], [])
    with pytest.raises(FrozenInstanceError):
        command.delay = 1.0  # type: ignore[misc]


def test_a_result_with_ctx_writes_is_decided_by_the_generated_handler() -> None:
    """A `step.done` carrying ctx writes goes through `ControlVM._result` (the writes first),
    then to the step's handler once it has one, as a result without writes does: the handler
    is generated once, never again for each such result."""
    program = LoadedProgram(_compiled(CYCLE.replace("EVENTS", "0").replace("RUNS", "0")))
    vm = ControlVM(program, dict(program.workload), EXECUTION)
    pending = list(vm.start().commands)
    handlers = done_handlers(program)
    seen = []
    while pending and not vm.finished():
        command = pending.pop()
        i = vm.ctx.get("i", 0) + 1
        payload: dict[str, Any] = {"result": i, "ctx_writes": [["i", i]]}
        event = Event("step.done", "worker", command.step, command.step_run_id, None, payload)
        pending.extend(vm.step(event).commands)
        seen.append(handlers.get("count"))
    assert vm.status == "completed" and vm.ctx["i"] == 51 and vm.steps["count"].runs == 49
    generated = [h for h in seen if h is not None]
    assert len(generated) > 40 and all(h is generated[0] for h in generated)


def test_compiled_guards_are_inlined_and_fail_alike() -> None:
    """A compiled guard's code is inlined into its step's handler (`specialise._guard_lines`:
    no call of the guard), and a guard that raises (`1 // 0` in `broken`) ends the execution
    with the same error, the same firings and the same events as the table interpreter."""
    payload = _compiled(SHAPES)
    program = LoadedProgram(payload)
    tables = ControlVM(program, {}, "x").tables
    for step in ("count", "broken"):
        handler = heat(program, tables[step], 1)
        assert handler is not None
        assert "GUARD" not in handler.__code__.co_names, step
        assert "_fail" in handler.__code__.co_names, step
    ends = []
    for specialise in (1, None):
        program = LoadedProgram(payload)
        vm = ControlVM(program, {"n": 2, "limit": -1}, EXECUTION, specialise=specialise)
        pending = list(vm.start().commands)
        events: list[Any] = []
        while pending and not vm.finished():
            command = pending.pop()
            if command.step == "count":
                vm.ctx["i"] = vm.ctx.get("i", 0) + 1
            result = {"result": {"ok": True}}
            done = Event("step.done", "worker", command.step, command.step_run_id, None, result)
            answer = vm.step(done)
            events += answer.events
            pending.extend(answer.commands)
        assert vm.error is not None and vm.error["code"] == "NOE310"
        ends.append((vm.error, vm.firings, [(e.name, e.step, e.payload) for e in events]))
    assert ends[0] == ends[1]
    assert "ZeroDivisionError" in ends[0][0]["message"]


def test_only_the_generated_evaluator_of_a_source_is_inlined() -> None:
    """`inline_form` gives the body of the function the code generator makes from the source,
    and nothing for anything else: another function, a constant, a slow-path entry."""
    from noetlc.expr.compile import compile_expression
    from noetlc.expr.loader import inline_form
    from noetlc.expr.runtime import compile_entry

    source = "{{ ctx.i < workload.n }}"
    evaluator = compile_entry(compile_expression(source, mode="guard").to_entry())
    form = inline_form(evaluator, source, "guard")
    assert form is not None
    setup, expression, names = form
    assert setup == [] and "s.get('ctx', _UN)" in expression
    assert {"_fail", "_UN", "_attr", "type", "dict"} <= names.keys()
    assert names["_fail"] is evaluator.__globals__["_fail"]
    assert inline_form(lambda s: True, source, "guard") is None
    assert inline_form(evaluator, "{{ ctx.i > workload.n }}", "guard") is None
    const = compile_entry(compile_expression("text", mode="template").to_entry())
    assert inline_form(const, "text", "template") is None
