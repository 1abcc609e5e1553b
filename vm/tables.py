"""The control program's transition records loaded into per-step handler tables (once per
program, never rescanned).

Each record (`noetlc.ir.program.TransitionInfo`) becomes one `LoadedTransition` (slots): the
same facts with its guard callables, the decision's guards it must find false, and the
places it feeds split by the step they enter; the transitions are indexed by what triggers
them: a step's admission rules, its routes on `done`/`failed` and its dead-path arcs. Built
once per `LoadedProgram` and cached on it.
"""

from __future__ import annotations

from typing import Any

from noetlc.expr.runtime import Evaluator
from noetlc.ir.cycles import back_edges
from noetlc.ir.events import EventName
from noetlc.ir.program import TransitionInfo
from noetlc.vm.loaded_program import LoadedProgram


class LoadedTransition:
    """One transition record, loaded: expression indices turned into callables."""

    __slots__ = (
        "args",
        "dead_targets",
        "decision",
        "earlier",
        "entries",
        "events",
        "fails_execution",
        "guards",
        "id",
        "kind",
        "line",
        "skip",
        "step",
        "targets",
        "writes",
    )

    def __init__(
        self,
        record: TransitionInfo,
        expressions: list[Evaluator],
        decisions: dict[str, tuple[Evaluator, ...]],
        line: int,
    ) -> None:
        self.id = record.id
        self.kind = record.kind
        self.step = record.step
        self.line = line
        self.events = frozenset(record.on)
        self.guards: tuple[tuple[Evaluator, bool], ...] = tuple(
            (expressions[expr], negated) for expr, negated in record.guards
        )
        # exclusive routing: the first `earlier` guards of `decision` (the guards of the arcs
        # before this one, shared by every arc of the decision, not copied) must be false
        self.earlier: int = record.earlier
        self.decision: tuple[Evaluator, ...] = decisions[record.consume[0]] if self.earlier else ()
        self.args: int | None = record.args
        self.writes: int | None = record.writes
        self.targets: tuple[str, ...] = tuple(p for p in record.produce if p != "execution.sink")
        self.dead_targets: tuple[str, ...] = tuple(p for p in record.dead if p != "execution.sink")
        # each target with the step whose entry it is (None for a join branch place), so
        # putting a token needs no string work at run time
        self.entries: tuple[tuple[str, str | None], ...] = tuple(
            (place, place[: -len(".entry")] if place.endswith(".entry") else None)
            for place in self.targets
        )
        self.fails_execution = record.fails_execution
        self.skip = record.admit == 0


# The name the control VM's modules import (vm/routing.py, vm/admission.py, vm/specialise.py).
DecodedTransition = LoadedTransition


def clear_prefix(
    decision: tuple[Evaluator, ...],
    clear: int,
    earlier: int,
    fired: set[Any],
    values: dict[Any, bool],
    scope: dict[str, Any],
) -> int:
    """Extend the known-false prefix of `decision` (its first `clear` guards) toward `earlier`;
    stop at a guard that is true or belongs to a route that fired (then an earlier arc
    matched). Evaluates each guard at most once per `values` (the decision's cache), so a
    router of n arcs costs O(n) guard checks, not O(n²)."""
    while clear < earlier:
        evaluate = decision[clear]
        if evaluate in fired:
            return clear  # an earlier arc fired (a ctx write cannot undo that)
        value = values.get(evaluate)
        if value is None:
            value = values[evaluate] = bool(evaluate(scope))
        if value:
            return clear
        clear += 1
    return clear


def first_passing(
    transitions: list[LoadedTransition] | tuple[LoadedTransition, ...], scope: dict[str, Any]
) -> LoadedTransition | None:
    """The first transition whose guard passes (admission rules, a listener's routes): each
    distinct guard is evaluated at most once, the earlier guards of exclusive routing with
    `clear_prefix`, so n rules cost O(n) evaluations."""
    values: dict[Any, bool] = {}
    clear = 0
    for transition in transitions:
        if not transition.guards and not transition.earlier:
            return transition  # unguarded (a step without admission rules): the hot path
        for evaluate, negated in transition.guards:
            value = values.get(evaluate)
            if value is None:
                value = values[evaluate] = bool(evaluate(scope))
            if value is negated:
                break
        else:
            if transition.earlier:
                clear = clear_prefix(
                    transition.decision, clear, transition.earlier, _NONE_FIRED, values, scope
                )
                if clear < transition.earlier:
                    continue
            return transition
    return None


_NONE_FIRED: set[Any] = set()  # admission and listener decisions fire nothing before they choose


class StepTable:
    """Everything the control VM does for one step."""

    __slots__ = (
        "admission",
        "alternatives",
        "back_targets",
        "done_on",
        "done_plan",
        "done_routes",
        "failed_on",
        "failed_routes",
        "items",
        "join_feeds",
        "listener",
        "listener_timeout",
        "loop",
        "name",
        "plain_rule",
        "slots",
        "slots_from",
        "stop_when",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.admission: list[LoadedTransition] = []  # start / admit / skip, in rule order
        self.done_routes: list[LoadedTransition] = []  # route, dead and end transitions on `done`
        self.failed_routes: list[LoadedTransition] = []  # route and unhandled on `failed`
        # the same routes indexed by boundary event name, dead arcs left out (they never fire)
        self.done_on: dict[str, tuple[LoadedTransition, ...]] = {}
        self.failed_on: dict[str, tuple[LoadedTransition, ...]] = {}
        # every place a route of this step feeds on the way to an AND-join: an arc that does
        # not fire sends a dead token there (dead-path elimination)
        self.join_feeds: tuple[str, ...] = ()
        self.back_targets: frozenset[str] = frozenset()  # successors closing a cycle
        self.loop: dict[str, Any] | None = None
        self.items: Evaluator | None = None
        self.stop_when: Evaluator | None = None  # a loop's early-exit condition
        self.slots = 1
        # a parallel loop's `max_in_flight` template, evaluated when the loop starts
        self.slots_from: Evaluator | None = None
        self.listener_timeout: float | None = None
        self.listener = False
        # distinct forward predecessors (back edges of cycles excluded): a merge of that many
        # alternatives is dead only when all of them are (dead-path elimination)
        self.alternatives = 0
        # `step.done` of a common shape: vm/specialise.py generates its handler (None: the
        # general path decides)
        self.done_plan: DonePlan | None = None
        # a plain step (no loop, no listener) with one unguarded rule that admits without
        # writing ctx: a live token enters it without the general admission
        self.plain_rule: LoadedTransition | None = None


def build_tables(program: LoadedProgram) -> dict[str, StepTable]:
    cached: dict[str, StepTable] | None = getattr(program, "_tables", None)
    if cached is not None:
        return cached
    tables: dict[str, StepTable] = {}
    for info in program.steps.values():
        table = tables[info.name] = StepTable(info.name)
        table.loop = info.loop
        stop = (table.loop or {}).get("stop_when")
        table.stop_when = program.expressions[stop] if stop is not None else None
        slots_from = (table.loop or {}).get("max_in_flight_from")
        if slots_from is not None and (table.loop or {}).get("mode") == "parallel":
            table.slots_from = program.expressions[slots_from]
        listener = info.listener
        table.listener = listener is not None
        table.listener_timeout = (listener or {}).get("timeout")
    positions = program.positions
    for record in program.transitions:
        if record.step is None or record.step not in tables:
            continue
        table = tables[record.step]
        transition = LoadedTransition(
            record, program.expressions, program.decisions, positions[record.position].line
        )
        place = record.consume[0] if record.consume else ""
        if record.kind in ("start", "admit", "skip") and place.endswith(".entry"):
            table.admission.append(transition)
            if record.loop is not None:
                items, slots = record.loop
                table.items = program.expressions[items] if items is not None else None
                table.slots = max(1, int(slots or 1))
        elif record.kind in ("route", "dead", "end") and place.endswith((".done", ".waiting")):
            table.done_routes.append(transition)
        elif record.kind in ("route", "unhandled") and place.endswith(".failed"):
            table.failed_routes.append(transition)
    # Steps whose success can reach a join branch: their dead paths must be announced (when
    # the step is skipped, receives a dead token, or fails and the failure is handled).
    on_join_path: set[str] = set()
    changed = True
    while changed:
        changed = False
        for table in tables.values():
            if table.name in on_join_path:
                continue
            for t in (*table.done_routes, *table.failed_routes):
                if any(_feeds_join(p, on_join_path) for p in (*t.targets, *t.dead_targets)):
                    on_join_path.add(table.name)
                    changed = True
                    break
    _count_alternatives(program.entry, tables)
    for table in tables.values():
        targets: dict[str, None] = {}
        for t in (*table.done_routes, *table.failed_routes):
            for place in (*t.targets, *t.dead_targets):
                back = place.endswith(".entry") and place[: -len(".entry")] in table.back_targets
                if _feeds_join(place, on_join_path) and not back:  # never around a cycle
                    targets[place] = None
        table.join_feeds = tuple(targets)
        table.done_on = _by_event(table.done_routes)
        table.failed_on = _by_event(table.failed_routes)
        table.plain_rule = _plain_rule(table)
    for table in tables.values():
        table.done_plan = _done_plan(table, tables)
    program._tables = tables  # type: ignore[attr-defined]
    return tables


# What a plain step does on `step.done`: (guard, taken, its target, otherwise, its target):
# `taken` fires when `guard` is None or true, else `otherwise` (None: nothing fires); a
# route's target is the table of the step it enters when it feeds exactly one, else None.
DonePlan = tuple[
    Evaluator | None,
    LoadedTransition,
    "StepTable | None",
    LoadedTransition | None,
    "StepTable | None",
]


def _plain_rule(table: StepTable) -> LoadedTransition | None:
    if table.loop is not None or table.listener or len(table.admission) != 1:
        return None
    rule = table.admission[0]
    plain = not rule.guards and not rule.earlier and not rule.skip and rule.writes is None
    return rule if plain else None


def _done_plan(table: StepTable, tables: dict[str, StepTable]) -> DonePlan | None:
    """The shapes a `step.done` of a plain step (no loop, no listener, no join downstream)
    decides without the general router: one unguarded route or end, one guarded route, or
    an exclusive pair `g` / else (a route, or the end a lone guarded arc gets). Routes write
    no ctx and feed step entries only (no join place); their firing order and guard
    evaluations are the general router's."""
    if table.loop is not None or table.listener or table.join_feeds:
        return None
    routes = table.done_on.get(EventName.STEP_DONE, ())
    if not 1 <= len(routes) <= 2 or not all(_plain_route(t) for t in routes):
        return None
    first = routes[0]
    if first.earlier or len(first.guards) > 1:
        return None
    guard = None
    if first.guards:
        evaluate, negated = first.guards[0]
        if negated:
            return None
        guard = evaluate
    if len(routes) == 1:
        return guard, first, _target(first, tables), None, None
    other = routes[1]
    if guard is None or other.guards or other.earlier != 1 or other.decision[:1] != (guard,):
        return None
    return guard, first, _target(first, tables), other, _target(other, tables)


def _target(t: LoadedTransition, tables: dict[str, StepTable]) -> StepTable | None:
    if t.kind != "route" or len(t.entries) != 1:
        return None
    return tables.get(t.entries[0][1] or "")


def _plain_route(t: LoadedTransition) -> bool:
    if t.kind == "end":
        return not t.guards and t.writes is None and not t.entries  # (`earlier`: see above)
    return (
        t.kind == "route"
        and t.writes is None
        and not t.fails_execution
        and all(entry is not None for _, entry in t.entries)
    )


def _by_event(routes: list[LoadedTransition]) -> dict[str, tuple[LoadedTransition, ...]]:
    names = {name for t in routes for name in t.events}
    return {
        name: tuple(t for t in routes if t.kind != "dead" and name in t.events) for name in names
    }


def _successors(table: StepTable, joins: bool = False) -> list[str]:
    """The steps a table's routes enter; with `joins`, also the join steps whose branch places
    they fill (a cycle may close through a join: its back arc is found only on that graph)."""
    out: dict[str, None] = {}
    for t in (*table.done_routes, *table.failed_routes):
        if t.kind != "route":
            continue
        for place in t.targets:
            if place.endswith(".entry"):
                out[place[: -len(".entry")]] = None
            elif joins and ".from." in place:
                out[place.split(".from.", 1)[0]] = None
    return list(out)


def _count_alternatives(entry: str, tables: dict[str, StepTable]) -> None:
    """Count each step's forward predecessors; a cycle's back edge is not an alternative. The
    back edges are those of the graph that goes on through joins (a loop whose body holds a
    fork-join closes its cycle through the join); a join's branches are not alternatives."""
    successors = {name: _successors(table) for name, table in tables.items()}
    walk = {name: _successors(table, joins=True) for name, table in tables.items()}
    back = back_edges((entry, *tables), walk)
    preds: dict[str, set[str]] = {name: set() for name in tables}
    targets: dict[str, set[str]] = {name: set() for name in tables}
    for node, nexts in successors.items():
        for nxt in nexts:
            if nxt not in tables:
                continue
            if (node, nxt) in back:
                targets[node].add(nxt)
            else:
                preds[nxt].add(node)
    for name, table in tables.items():
        table.alternatives = len(preds[name])
        table.back_targets = frozenset(targets[name])


def _feeds_join(place: str, on_join_path: set[str]) -> bool:
    return ".from." in place or (
        place.endswith(".entry") and place[: -len(".entry")] in on_join_path
    )
