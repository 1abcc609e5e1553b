"""Soundness of the workflow net: option to complete, proper completion, no stuck joins.

Guards are abstracted to "either way" (except what `guards.truth` decides). The check runs in
three stages: build the token system from the net (`model.py`), collapse its structured
fragments — sequences, exclusive and inclusive blocks, bounded loops (`structure.py`) — and,
only when something is left, search the remaining state space explicitly with stubborn sets
and a state budget (`statespace.py`). Every violation comes with a counterexample: the
steps and transitions (with YAML lines) that lead to it.

Properties and where they are reported:

* proper completion — no execution ends with a live token waiting at an AND-join
  (NOE504, `rules/join_deadlock.py`);
* option to complete — from every reachable state some completion is reachable, unless the
  execution already failed (NOE505, `rules/completion.py`);
* boundedness — no reachable state strictly covers an earlier one on its path (NOE506);
* no dead transitions — statically dead arcs (NOE502) and unreachable steps (NOE501); a join
  that can never fire shows up as a deadlock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from noetlc.analysis import model, scenarios, statespace, structure
from noetlc.analysis.context import LintContext
from noetlc.analysis.graphs import cyclic_components
from noetlc.diagnostics.report import Span, TraceStep
from noetlc.ir.net import Transition

Kind = Literal["deadlock", "trap", "unbounded"]


@dataclass(frozen=True, slots=True)
class Finding:
    kind: Kind
    step: str  # where it is reported: the join, the step of the cycle, the growing step
    message: str
    trace: tuple[TraceStep, ...]
    inputs: str = ""  # the workload values of the scenario it happens in ("": any)

    def witness(self) -> tuple[str, tuple[TraceStep, ...]]:
        """The message and the path, both naming the workload values when a scenario
        decided it (the first step of the path says them too: JSON and SARIF show it)."""
        if not self.inputs:
            return self.message, self.trace
        return (
            f"{self.message} (with {self.inputs})",
            (TraceStep(f"with {self.inputs}", None), *self.trace),
        )


@dataclass
class SoundnessResult:
    states: int = 0  # states explored by the explicit search (0: the structure decided)
    structural: bool = False  # the reduction alone decided soundness
    complete: bool = True  # False when the search stopped at the budget
    nodes: int = 0  # steps left after the reduction
    max_tokens: int = 0  # the largest marking the search saw
    seconds: float = 0.0
    approximate: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    ran: set[str] = field(default_factory=set)  # steps some explored execution runs
    scenarios: int = 0  # scenarios of workload-only guards checked (0: none needed)
    merge_checks: int = 0  # merges the reduction looked at (for the tests: linear work)

    def of(self, kind: Kind) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]


def shared(ctx: LintContext) -> SoundnessResult:
    """The soundness result of the playbook, computed once and shared by every rule."""
    result = ctx.computed.get("soundness")
    if result is None:
        result = ctx.computed["soundness"] = by_scenario(ctx)
    assert isinstance(result, SoundnessResult)
    return result


def by_scenario(ctx: LintContext) -> SoundnessResult:
    """The abstract check (every guard "either way"), then — when it found something, or a
    cycle could turn on a guard that reads only the workload — one check per scenario of those
    guards (`scenarios.py`). The abstract check over-approximates every scenario's deadlocks,
    so with no finding and no such cycle it is the verdict; a cycle's exit that never changes
    is only visible per scenario."""
    fixed = scenarios.fixed_guards(ctx)
    if not fixed:
        return check(ctx)
    cases = scenarios.scenarios(ctx)
    fits = bool(cases) and len(cases or ()) * max(1, len(ctx.steps)) <= MAX_SCENARIO_WORK
    start = time.perf_counter()
    template = model.build(ctx)
    built = time.perf_counter() - start
    base: SoundnessResult | None = None
    if not (fits and _cycle_reads(ctx, set(fixed))):
        # the abstract check decides unless it finds something (then the scenarios say
        # which findings some workload gives); with a cycle that reads a fixed guard the
        # scenarios run anyway and their verdicts are the whole answer (each scenario's
        # executions are executions of the abstract system: it adds nothing)
        base = check(ctx, system=model.specialise(ctx, template, {}))
        if cases:
            # what runs in some scenario, joins aside (O(steps) each): arcs whose guards
            # contradict every scenario's inputs lead nowhere
            base.ran &= set().union(*(_reach(ctx, case.values, case.events) for case in cases))
        if not base.findings:
            return base
        if not fits:
            base.approximate.append(
                "workload guards: too many combinations to check one by one"
                if cases is None or cases
                else "workload guards: no workload value evaluates them (the abstract verdict)"
            )
            return base
    assert cases is not None
    merged = SoundnessResult(
        structural=True,
        scenarios=len(cases),
        approximate=list(base.approximate) if base is not None else [],
    )
    keys: set[tuple[str, str]] = set()
    # one state budget for the whole lint: the scenarios share what the abstract check left
    # (a scenario that gets none is searched with none: partial, NOE509 says so)
    left = max(0, ctx.budget_states - (base.states if base is not None else 0))
    steps = model.reading(ctx, template, set(fixed))  # every scenario fixes the same guards
    for case in cases:
        system = model.specialise(ctx, template, case.values, steps, case.events)
        one = check(ctx, fixed=case.values, budget=left, system=system)
        left = max(0, left - one.states)
        merged.states += one.states
        merged.merge_checks += one.merge_checks
        merged.structural = merged.structural and one.structural
        merged.complete = merged.complete and one.complete
        merged.nodes = max(merged.nodes, one.nodes)
        merged.max_tokens = max(merged.max_tokens, one.max_tokens)
        merged.seconds += one.seconds
        merged.ran |= one.ran
        merged.approximate += [a for a in one.approximate if a not in merged.approximate]
        for f in one.findings:
            if (f.kind, f.step) not in keys:
                keys.add((f.kind, f.step))
                merged.findings.append(replace(f, inputs=case.describe(ctx)))
    if base is not None:
        merged.seconds += base.seconds
        merged.merge_checks += base.merge_checks
        merged.ran &= base.ran
    merged.seconds += built
    return merged


def _at(events: model.Events, event: str) -> Callable[[int], bool | None]:
    def value(index: int) -> bool | None:
        return events.get((index, event))

    return value


def _reach(
    ctx: LintContext, fixed: dict[int, bool], events: model.Events | None = None
) -> set[str]:
    """The steps the step graph reaches by arcs a scenario's fixed guards do not rule out
    (`events`: those that test the event's name, ruling an arc out at every event it fires
    on)."""

    def ruled_out(t: Transition, values: Callable[[int], bool | None]) -> bool:
        if t.guard.expr is not None and values(t.guard.expr) is False:
            return True
        return any(values(n) is True for n in ctx.negations(t))

    def passes(t: Transition) -> bool:
        if ruled_out(t, fixed.get):
            return False
        if not events or not t.events:
            return True
        return not all(ruled_out(t, _at(events, e)) for e in t.events)

    seen = {ctx.net.entry_step}
    todo = [ctx.net.entry_step]
    while todo:
        step = todo.pop()
        for target, t in ctx.step_graph.get(step, ()):
            if target not in seen and passes(t):
                seen.add(target)
                todo.append(target)
    return seen


MAX_SCENARIO_WORK = 400_000  # scenarios x steps


def _cycle_reads(ctx: LintContext, fixed: set[int]) -> bool:
    """Some step cycle has an arc whose guard (or an earlier arc's) reads only the workload."""
    successors = {s: [t for t, _ in arcs] for s, arcs in ctx.step_graph.items()}
    for component in cyclic_components(successors):
        for step in component:
            for _, t in ctx.step_graph[step]:
                if t.guard.expr in fixed or fixed.intersection(ctx.negations(t)):
                    return True
    return False


def check(
    ctx: LintContext,
    *,
    por: bool = True,
    reduce: bool = True,
    fixed: dict[int, bool] | None = None,
    budget: int | None = None,
    system: model.System | None = None,
) -> SoundnessResult:
    """One check; the search explores at most `budget` states (default: the context's).
    `system`: the token system already built for `fixed` (`model.specialise`)."""
    start = time.perf_counter()
    if system is None:
        system = model.build(ctx, fixed)
    result = SoundnessResult(approximate=list(system.approximate))
    traps: list[structure.Trap] = []
    growing = structure.growth(system)
    original = dict(system.outcomes)  # the reduction replaces lists, never edits them
    reduced = reduce and not system.any_branch
    if reduced:
        # an `any` join's has-run flag is state the reductions do not keep (a merge's count
        # is, see `structure._fold_merges`)
        reduction = structure.reduce(system)
        traps = reduction.traps
        result.structural = reduction.trivial(system)
        result.merge_checks = reduction.merge_checks
        # (a merge that still counts is searched on the reduced system too: every outcome
        # says the order its dead and live arrivals take, `model.Outcome.first`)
    for step, path in growing:
        result.findings.append(
            Finding(
                "unbounded",
                step,
                f"tokens pile up behind `{step}`: it forks inside a cycle that no join closes, "
                "so each turn leaves one more token in flight",
                (*ctx.path_to(step), *_trace(ctx, path)),
            )
        )
    result.nodes = len(system.outcomes)
    for trap in traps:
        trace = (*ctx.path_to(trap.step), *_trace(ctx, trap.loop))
        result.findings.append(
            Finding(
                "trap",
                trap.step,
                f"step `{trap.step}` is on a cycle no arc leaves: once there, the execution "
                "can only end by failing",
                trace,
            )
        )
    if not result.structural:
        limit = ctx.budget_states if budget is None else budget
        search = statespace.explore(system, limit, por=por)
        result.states = search.states
        result.complete = search.complete
        result.max_tokens = search.max_tokens
        _convert(ctx, system, search, result, {t.step for t in traps})
    if reduced:  # outcomes were merged: the over-approximation says what may run
        result.ran = model.reachable_steps(system, original)
    else:  # the search ran on the whole system: its moves say what runs
        result.ran = model.steps_run(search.moves)
    if reduced or result.complete:
        # the reduction rewrites every node, run or not: a cycle no execution enters traps
        # nothing (differential seed 50: a false NOE505 at a step no arc can reach)
        result.findings = [
            f
            for f in result.findings
            if f.kind not in ("trap", "unbounded") or f.step in result.ran
        ]
    result.seconds = time.perf_counter() - start
    return result


def _convert(
    ctx: LintContext,
    system: model.System,
    search: statespace.Search,
    result: SoundnessResult,
    trapped: set[str],
) -> None:
    seen: set[tuple[str, str]] = {(f.kind, f.step) for f in result.findings}
    for v in sorted(search.violations, key=lambda v: v.path.length):
        places = [(system.places[slot // 2], slot % 2, count) for slot, count in v.marking]
        live = [(p, c) for p, color, c in places if color == model.LIVE]
        if v.kind == "deadlock":
            waiting = [p for p, _ in live if ".from." in p]
            joins = sorted({p.split(".from.")[0] for p in waiting}) or [
                live[0][0].rsplit(".", 1)[0]
            ]
            for join in joins:
                if ("deadlock", join) in seen:
                    continue
                seen.add(("deadlock", join))
                arrived = sorted({p.split(".from.")[1] for p in waiting if p.startswith(join)})
                message = (
                    f"the join `{join}` can wait forever: {_names(arrived)} arrived but "
                    f"{_names(_missing(ctx, join, arrived))} never will"
                )
                result.findings.append(Finding("deadlock", join, message, _trace(ctx, v.path)))
            continue
        elif v.kind == "trap":
            steps = sorted({_step_of_place(p) for p, _ in live})
            if trapped & set(steps):
                continue
            step = steps[0] if steps else ctx.net.entry_step
            message = (
                f"from here no final step can be reached: {_names(steps)} can only loop or fail"
            )
        else:
            grown = [p for p, c in live if c > 1] or [p for p, _ in live]
            if not grown:
                continue  # only dead tokens pile up (at a join in a cycle): nothing runs
            step = _step_of_place(grown[0])
            message = (
                f"tokens pile up at `{step}`: a cycle passes an inclusive fork without its "
                "join, so each turn leaves one more token"
            )
        key = (v.kind, step)
        if key in seen:
            continue
        seen.add(key)
        result.findings.append(Finding(v.kind, step, message, _trace(ctx, v.path)))


def _step_of_place(place: str) -> str:
    return place.split(".from.")[0] if ".from." in place else place.rsplit(".", 1)[0]


def _missing(ctx: LintContext, join: str, arrived: list[str]) -> list[str]:
    for info in ctx.net.joins:
        if info.step == join:
            return [b for b in info.branches if b not in arrived]
    return []


def _names(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names) if names else "nothing"


def _trace(ctx: LintContext, path: model.Path) -> tuple[TraceStep, ...]:
    out: list[TraceStep] = []
    for item in path.flatten():
        if item.transition.endswith(".start"):
            continue  # admission without rules: nothing to see
        span = ctx.span_of(item.pos)
        out.append(
            TraceStep(_describe(item.transition), span, step=item.step, transition=item.transition)
        )
    return tuple(out)


def _describe(transition: str) -> str:
    if "->" in transition:
        source, rest = transition.split("->", 1)
        target = rest.split("#", 1)[0]
        if rest.endswith(".dead"):
            return f"{source}: arc to `{target}` not taken (dead token)"
        if rest.endswith(".failed"):
            return f"{source} failed -> {target}"
        return f"{source} -> {target}"
    step, _, what = transition.rpartition(".")
    words = {
        "complete": "succeeds",
        "fail": "fails",
        "loop_done": "loop done",
        "loop_failed": "loop fails",
        "end": "ends (no arc matched)",
        "unhandled": "fails, unhandled",
        "join": "join fires",
        "listen": "waits for a signal",
    }
    if what.startswith(("admit#", "skip#")) or (what in ("end",) and step.endswith(".skipped")):
        return f"{step}: {what}"
    return f"{step} {words.get(what, what)}"


def span_of_step(ctx: LintContext, step: str) -> Span | None:
    info = ctx.steps.get(step)
    return info.name_span if info is not None else None
