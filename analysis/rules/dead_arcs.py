"""NOE502: arcs that can never fire.

An arc's transitions in the net carry its effective guard (the `when`, plus in exclusive mode
the negations of every earlier arc) and the boundary events it reacts to. The arc is dead when,
for every event its source step can emit at that place, the guard is false: a condition that
folds to false, an `event.name` test the step can never satisfy (`loop.done` without a loop),
or an earlier arc that always fires first. The net builder already drops arcs shadowed by an
earlier arc without `when`; those have no transition at all.
"""

from __future__ import annotations

from noetlc.analysis.context import LintContext
from noetlc.analysis.guards import truth
from noetlc.compiler import tree
from noetlc.ir.events import STEP_FAILED, EventName
from noetlc.ir.net import Transition


def run(ctx: LintContext) -> None:
    routes: dict[tuple[str, int], list[Transition]] = {}
    for t in ctx.net.transitions:
        index = ctx.arc_index(t)
        if t.kind == "route" and t.step is not None and index is not None:
            routes.setdefault((t.step, index), []).append(t)
    for step in ctx.playbook.workflow:
        if step.next is None:
            continue
        for i, arc in enumerate(step.next.arcs):
            reason = _why_dead(ctx, step, i, routes.get((step.name, i), []))
            if reason is not None:
                span = arc.when.span if arc.when is not None else arc.span
                ctx.report("NOE502", f"the arc to `{arc.step}` can never fire: {reason}", span)


def _why_dead(ctx: LintContext, step: tree.Step, i: int, ts: list[Transition]) -> str | None:
    assert step.next is not None
    if not ts:
        earlier = next(
            (a for a in step.next.arcs[:i] if a.when is None), None
        )  # the net dropped it: shadowed by an unconditional arc
        where = f" (line {earlier.span.line})" if earlier is not None else ""
        return (
            f"the earlier arc to `{earlier.step if earlier else '?'}`{where} has no `when`, "
            "so in exclusive mode it always fires first"
        )
    possible: list[tuple[Transition, str]] = []
    for t in ts:
        events = ctx.place_events(t.consume[0])
        possible.extend((t, e) for e in t.events if e in events)
    if not possible:
        tested = sorted({e for t in ts for e in t.events})
        emits = _emits(ctx, step)
        return (
            f"it tests {_list(tested)}, which step `{step.name}` never emits "
            f"(it ends with {_list(emits)})"
        )
    if any(ctx.transition_truth(t, e) is not False for t, e in possible):
        return None
    entries = ctx.pool.entries
    t0, e0 = possible[0]
    if t0.guard.expr is not None and all(
        truth(entries[t.guard.expr], e) is False for t, e in possible if t.guard.expr is not None
    ):
        entry = entries[t0.guard.expr]
        if entry.is_constant:
            return f"its condition `{entry.normalized}` is always false"
        return (
            f"its condition `{entry.normalized}` is false for every event step "
            f"`{step.name}` emits ({_list(_emits(ctx, step))})"
        )
    for n in ctx.negations(t0):
        if n == t0.guard.expr:
            earlier = _arc_with_guard(ctx, step, i, n)
            line = f" (line {earlier.span.line})" if earlier is not None else ""
            return f"an earlier arc{line} has the same condition and fires first"
        if truth(entries[n], e0) is True:
            earlier = _arc_with_guard(ctx, step, i, n)
            if earlier is not None:
                return (
                    f"the earlier arc to `{earlier.step}` (line {earlier.span.line}) always "
                    f"fires on {e0}, so in exclusive mode it shadows this one"
                )
    return "its guard is always false"


def _arc_with_guard(ctx: LintContext, step: tree.Step, i: int, expr: int) -> tree.Arc | None:
    assert step.next is not None
    for j, arc in enumerate(step.next.arcs[:i]):
        if ctx.pool.by_path.get(("workflow", step.name, "next", j, "when")) == expr:
            return arc
    return None


def _emits(ctx: LintContext, step: tree.Step) -> list[str]:
    if step.listener is not None:
        return [EventName.SIGNAL_RECEIVED.value, EventName.TIMER_FIRED.value]
    return [ctx.done_event(step.name), STEP_FAILED]


def _list(names: list[str]) -> str:
    return " or ".join(f"`{n}`" for n in names)
