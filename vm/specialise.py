"""Specialised Python for the control VM's hot path, generated per program for its hot steps.

The tables (vm/tables.py) describe every step's transitions as data; the control VM's general
path (`Boundary._boundary` → `Routing._route` → `Admission._enter`) interprets them. For the
common shape of a plain step's `step.done` (`tables.DonePlan`: one unguarded route or end, one
guarded route, or an exclusive pair `g` / else; routes that write no ctx and feed step entries
only; no loop, no listener, no join downstream), this module generates one Python function
per step that does the same with the table's decisions taken at generation time: the
boundary's bookkeeping, the guard, the firing, the `next.selected` record and, when the
target is a plain step (`StepTable.plain_rule`), its admission, its `step.scheduled` record
and its `run` command. Same state, same events, same guard evaluations, same firings, same
commands: tests/vm/test_vm_specialised.py runs both against each other.

What is generated comes only from the verified tables, never from stored code. The source is
made of this module's own text and identifiers: every value that comes from the program (step
names, transition ids, guard callables — themselves rebuilt from their sources and
hash-checked by `noetlc.expr.loader`) is bound in the function's globals under a generated
name, never written into the source. The source depends only on the shape, so one code
object serves every step of the same shape (compiled once per process). One exception: a
compiled guard's own code is inlined in place of its call (`_guard_lines`). That code is
what this process's expression code generator makes from the guard's source, the code the
guard's function runs (`expr.loader.inline_form` checks the function is exactly that), with
the same globals; the handler then also depends on the guard's code.

Where the scope's `event` is set: the general path sets it before the guard and the
admission of the next step removes it. A guard or an args template whose source never
mentions `event` cannot read it, so the generated code sets it only where it is read or where
it stays (an end, a token queued, a target entered by the general admission).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from noetlc.expr.loader import inline_form
from noetlc.ir.events import EventName
from noetlc.vm.admission import enter
from noetlc.vm.control_state import StepRecord, StepRun, Token, arc_output
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.protocol import Command, CommandDraft, CommandKind
from noetlc.vm.tables import LoadedTransition, StepTable

# (the VM, the finished run, its result, the commands issued so far) -> None: it counted its
# firings (the step's complete transition included) and recorded its events
# (`ControlVM._events`); or the one record of its events, not recorded (a
# `protocol.RoutedRecord`): it admitted the next run of a plain step and nothing is left for
# `ControlVM.step` to do after it (no token ready, a run in flight, the events budget
# checked), so the record is the answer's (`Step.records`)
DoneHandler = Callable[[Any, StepRun, Any, list[Command]], tuple[Any, ...] | None]

# The decimal text of a run number below 10,000 (a run id is `step#N`): one list index per
# admission instead of formatting the int (built once per process, ~0.5 MB)
RUN_NUMBERS = 10_000

_GLOBALS: dict[str, Any] = {
    "Token": Token,
    "ARC_OUTPUT": arc_output,
    "StepRun": StepRun,
    "StepRecord": StepRecord,
    "Command": Command,
    "CommandDraft": CommandDraft,
    "ENTER": enter,
    "_digits": None,  # `RUN_NUMBERS` strings, set when the first handler is generated
    "RUN": CommandKind.RUN.value,
    "STEP_DONE": EventName.STEP_DONE.value,
    "NEXT_SELECTED": EventName.NEXT_SELECTED.value,
    "STEP_SCHEDULED": EventName.STEP_SCHEDULED.value,
}


# A step's handler is generated at its second completion: a step that runs once (a chain)
# costs no generation, one that runs again (a cycle, a step of a program run many times) is
# specialised from then on. Both paths decide the same (tests/vm/test_vm_specialised.py).
HOT = 2


def done_handlers(program: LoadedProgram) -> dict[str, DoneHandler]:
    """step -> its generated `step.done` handler, for the steps generated so far (one dict
    per program, shared by its VMs; `heat` fills it)."""
    handlers: dict[str, DoneHandler] | None = getattr(program, "_done_handlers", None)
    if handlers is None:
        handlers = program._done_handlers = {}  # type: ignore[attr-defined]
        program._done_hits = {}  # type: ignore[attr-defined]
    return handlers


def heat(program: LoadedProgram, table: StepTable, hot: int) -> DoneHandler | None:
    """Count a completion of `table`'s step without a handler; at the `hot`-th, generate its
    handler (when its `step.done` has a plan) and return it. None: the table interpreter
    decides this one."""
    if table.done_plan is None:
        return None
    handlers = done_handlers(program)
    hits: dict[str, int] = program._done_hits  # type: ignore[attr-defined]
    count = hits[table.name] = hits.get(table.name, 0) + 1
    if count < hot:
        return None
    reads_event = getattr(program, "_reads_event", None)
    if reads_event is None:
        reads_event = program._reads_event = _reads_event(program)  # type: ignore[attr-defined]
    handler = handlers[table.name] = _handler(program, table, reads_event)
    return handler


def _reads_event(program: LoadedProgram) -> Callable[[Any], bool]:
    """Whether a guard (an evaluator) or a value (a value-pool index) may read `event` (or
    `output`, made with it): its source names it (conservative: any mention counts)."""
    sources = {
        id(e): s for e, s in zip(program.expressions, program.expression_sources, strict=True)
    }

    def reads(thing: Any) -> bool:
        if thing is None:
            return False
        if isinstance(thing, int):
            return any(
                _names_event(program.expression_sources[i])
                for i in _value_refs(program.values[thing])
            )
        return _names_event(sources.get(id(thing), "event"))

    return reads


def _names_event(source: str) -> bool:
    return "event" in source or "output" in source


def _value_refs(value: Any) -> list[int]:
    """The expression indices a value-pool entry evaluates (its `{"$e": i}` leaves)."""
    if isinstance(value, dict):
        if "$e" in value and len(value) == 1 and isinstance(value["$e"], int):
            return [value["$e"]]
        return [i for v in value.values() for i in _value_refs(v)]
    if isinstance(value, list):
        return [i for v in value for i in _value_refs(v)]
    return []


def _handler(
    program: LoadedProgram, table: StepTable, reads_event: Callable[[Any], bool]
) -> DoneHandler:
    assert table.done_plan is not None
    guard, taken, target, otherwise, otherwise_target = table.done_plan
    if _GLOBALS["_digits"] is None:
        _GLOBALS["_digits"] = list(map(str, range(RUN_NUMBERS)))
    budgets = program.budgets  # as `ControlVM` reads them
    constants: dict[str, Any] = {
        "STEP": table.name,
        "GUARD": guard,
        "VALUE": program.value,
        "MAX_EVENTS": budgets["events"],
        "MAX_STEP_RUNS": budgets["step_runs"],
    }
    lines = [
        "record = vm.steps[STEP]",
        "record.status = 'done'",
        "record.result = result",
        "vm.results[STEP] = result",
        "scope = vm.scope",
        "scope[STEP] = result",
        "vm.final_result = result",
        "scope['args'] = args = run.args",
    ]
    event_set = guard is not None and reads_event(guard)
    if event_set:
        lines.append(_SET_EVENT)
    if guard is not None:
        # the step's complete transition is counted with the first firing after it (see
        # `_branch`), or here when the guard raises or ends the handler
        lines += _guard_lines(program, guard, constants)
        lines.append("if not passed:")
        if otherwise is None:
            if not event_set:
                lines.append("    " + _SET_EVENT)
            lines += ["    vm.firings += 1", "    return"]
        else:
            branch = _branch(
                table, "B", otherwise, otherwise_target, event_set, constants, reads_event
            )
            lines.extend("    " + line for line in branch)
    lines.extend(_branch(table, "A", taken, target, event_set, constants, reads_event))
    source = "def handler(vm, run, result, commands):\n" + "".join(f"    {x}\n" for x in lines)
    namespace = {**_GLOBALS, **constants}
    exec(_compiled(source), namespace)  # our own source (see the module doc)
    handler: DoneHandler = namespace.pop("handler")
    return handler


def _guard_lines(program: LoadedProgram, guard: Any, constants: dict[str, Any]) -> list[str]:
    """`passed = GUARD(scope)`, counting the complete transition when it raises; or, for a
    compiled guard, the guard's own code in its place (`expr.loader.inline_form`: the
    expression over `s = scope`, its globals bound here): one Python call less per
    completion, and the same operations, value and `ExpressionError` as the call."""
    call = ["try:", "    passed = GUARD(scope)", "except BaseException:"]
    rest = ["    vm.firings += 1", "    raise"]
    form = _inline_form(program, guard)
    if form is None:
        return [*call, *rest]
    setup, expression, names = form
    if names.keys() & (constants.keys() | _GLOBALS.keys()):
        return [*call, *rest]  # (the generated code's names never collide: kept safe)
    constants.update(names)
    return [
        "s = scope",
        *setup,
        "try:",
        f"    passed = {expression}",
        "except Exception as e:",
        "    vm.firings += 1",
        "    raise _fail(e) from e",
        "except BaseException:",
        *rest,
    ]


def _inline_form(program: LoadedProgram, guard: Any) -> Any:
    """The guard's `inline_form` (None: call it), found by identity in the program's pool
    (an index by `id` built once per program: each hot step's handler looks up its guard)."""
    index: dict[int, int] | None = getattr(program, "_pool_index", None)
    if index is None:
        index = {}
        for i, evaluator in enumerate(program.expressions):
            index.setdefault(id(evaluator), i)  # the first entry, as a scan would find
        program._pool_index = index  # type: ignore[attr-defined]
    at = index.get(id(guard))
    if at is None:
        return None
    entry = program.image.expressions[at]
    return inline_form(guard, entry.source, entry.mode)


_DEL_EVENT = "    del scope['event']; scope.pop('output', None)"
_SET_EVENT = (
    "scope['event'] = {'name': STEP_DONE, 'step': STEP, 'data': {'result': result}}; "
    "scope['output'] = ARC_OUTPUT(result, None)"
)


def _branch(
    table: StepTable,
    prefix: str,
    transition: LoadedTransition,
    target: StepTable | None,
    event_set: bool,
    constants: dict[str, Any],
    reads_event: Callable[[Any], bool],
) -> list[str]:
    """The lines of one transition firing (ends with a `return`). Its first count of firings
    includes the step's complete transition (the handler counts it: one addition)."""
    if transition.kind != "route":  # an end transition
        return ["vm.firings += 2", *([] if event_set else [_SET_EVENT]), "return"]
    constants[f"{prefix}_ID"] = transition.id
    # the route's firing and the admission's are counted together when nothing between them
    # can raise (an args template can: then each is counted where the general path counts it)
    together = transition.args is None and target is not None and target.plain_rule is not None
    lines = [] if together else ["vm.firings += 2"]
    if transition.args is not None:
        constants[f"{prefix}_ARGS"] = transition.args
        if not event_set and reads_event(transition.args):
            lines.append(_SET_EVENT)
            event_set = True
        lines.append(f"args = VALUE({prefix}_ARGS, scope)")
    selected = (
        "vm.event_count = n = vm.event_count + 1",
        f"vm._events.append((NEXT_SELECTED, STEP, run.run_id, None, {prefix}_ID, n, vm._stamp))",
    )
    if transition.args is not None:
        # (without an args template `args` is the run's: a token's args, already passed
        # through this when the token was made, so the line would change nothing)
        lines += ["if not args and type(args) is not dict:", "    args = {}"]
    # where the token goes when it cannot enter its step at once (the general admission's
    # order: the ready queue first)
    queue = [
        f"ready.append(({prefix}_E{i}, Token(args, False, STEP)))"
        for i in range(len(transition.entries))
    ]
    for i, (_, entry) in enumerate(transition.entries):
        constants[f"{prefix}_E{i}"] = entry
    if not event_set:
        queue.insert(0, _SET_EVENT)
    if target is None:
        return [*lines, *selected, "ready = vm.ready", *queue, "return"]
    constants[f"{prefix}_TABLE"] = target
    if target.plain_rule is None:
        lines += [*selected, "ready = vm.ready", "if ready:", *(f"    {x}" for x in queue)]
        lines.append("    return")
        if not event_set:
            lines.append(_SET_EVENT)
        return [*lines, f"ENTER(vm, {prefix}_TABLE, Token(args, False, STEP), commands)", "return"]
    # `Admission._enter` of a plain step: its one rule admits the token. `next.selected` and
    # `step.scheduled` are recorded as one pair (`protocol.RoutedRecord`) unless something
    # comes between them (a queued token, the step_runs budget).
    constants[f"{prefix}_TO"] = target.name
    constants[f"{prefix}_RUN"] = f"{target.name}#"  # a run id is `step#N`
    lines += [
        "ready = vm.ready",
        "if ready:",
        *(f"    {x}" for x in selected),
        *(f"    {x}" for x in queue),
        "    vm.firings += 2" if together else "",
        "    return",
        "if vm.dead_arrivals:",
        f"    vm.dead_arrivals.pop({prefix}_TO, None)",
        *([] if transition.args is None else ["scope['args'] = args"]),
        *(
            ["del scope['event']", "del scope['output']"]
            if event_set
            else ["if 'event' in scope:", _DEL_EVENT]
        ),
        "vm.firings += 3" if together else "vm.firings += 1",
    ]
    if target is table:  # a cycle back into the step: its record is at hand
        lines.append("entered = record")
    else:
        lines += [
            f"entered = vm.steps.get({prefix}_TO)",
            "if entered is None:",
            f"    entered = vm.steps[{prefix}_TO] = StepRecord()",
        ]
    return [
        *lines,
        "entered.runs = runs = entered.runs + 1",
        "entered.status = 'running'",
        # the program's budgets are the generated code's constants (0: none)
        *(
            [
                "vm.step_runs = step_runs = vm.step_runs + 1",
                "if step_runs > MAX_STEP_RUNS:",
                *(f"    {x}" for x in selected),
                "    vm._over('step_runs', step_runs, MAX_STEP_RUNS)",
            ]
            if constants["MAX_STEP_RUNS"] > 0
            else ["vm.step_runs += 1"]
        ),
        f"run_id = {prefix}_RUN + (_digits[runs] if runs < {len(_GLOBALS['_digits'])} else str(runs))",
        # the finished run (a plain `StepRun` the VM no longer holds) becomes the new one
        "finished = run.run_id",
        "vm.runs[run_id] = run",
        *([] if target is table else [f"run.step = {prefix}_TO"]),
        "run.run_id = run_id",
        *([] if transition.args is None else ["run.args = args"]),  # (else: the same args)
        "vm.event_count = n = vm.event_count + 2",
        f"routed = (STEP, finished, {prefix}_ID, {prefix}_TO, run_id, args, n, vm._stamp)",
        "command = CommandDraft()",
        "command.kind = RUN",
        f"command.step = {prefix}_TO",
        "command.step_run_id = run_id",
        "command.args = args",
        "command.action_id = None",
        "command._execution = vm.execution_id",
        "command.iteration = None",
        "command.item = None",
        "command.delay = None",
        "command.__class__ = Command",
        "commands.append(command)",
        # the answer's records are these alone (none recorded before them in this step), and
        # `ControlVM.step`'s events budget holds (its count: the events recorded and fed)
        "events = vm._events",
        "if not events and n + vm.inputs <= MAX_EVENTS:"
        if constants["MAX_EVENTS"] > 0
        else "if not events:",
        "    return routed",
        "events.append(routed)",
        "return None",
    ]


@functools.lru_cache(maxsize=256)
def _compiled(source: str) -> Any:
    """One code object per shape (the source names its constants, never holds them)."""
    return compile(source, "<noetlc.vm.specialise>", "exec")
