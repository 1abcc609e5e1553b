"""What every lint rule reads: the compiled unit, its net and expression pool, and shared facts.

`LintContext` is built once per playbook after the `net` pass. Facts several rules need —
the events a step can emit, the static truth of each net transition's guard, the step graph,
are computed here once, lazily; results other modules compute once per playbook (the soundness
check) are kept in `computed`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from noetlc.analysis.guards import Truth, earlier_truths, guard_truth
from noetlc.compiler import tree
from noetlc.compiler.unit import CompilationUnit
from noetlc.diagnostics.report import Diagnostic, Span, TraceStep
from noetlc.expr.compile import ExpressionPool
from noetlc.ir.events import LOOP_DONE, STEP_DONE, STEP_FAILED, EventName
from noetlc.ir.net import Net, Place, Position, Transition, decision_guards, negations

DEFAULT_BUDGET = 200_000
_ARC_PATH = re.compile(r"\.next\.arcs\[(\d+)\]$")


@dataclass
class LintContext:
    unit: CompilationUnit
    playbook: tree.Playbook
    net: Net
    pool: ExpressionPool
    budget_states: int = DEFAULT_BUDGET
    findings: list[Diagnostic] = field(default_factory=list)
    # results computed once per playbook by the modules above this one, by name
    computed: dict[str, Any] = field(default_factory=dict, repr=False)
    # per (decision place, event): the truth of "none of its first k guards holds", by k
    _earlier_truths: dict[tuple[str, str | None], list[Truth]] = field(
        default_factory=dict, repr=False
    )
    _first_rank: dict[str, dict[int, int]] = field(default_factory=dict, repr=False)

    @property
    def file(self) -> str:
        return self.unit.file

    # ------------------------------------------------------------------ reporting

    def report(
        self,
        code: str,
        message: str,
        span: Span | None,
        *,
        hint: str | None = None,
        trace: tuple[TraceStep, ...] = (),
        related: tuple[tuple[str, Span], ...] = (),
    ) -> None:
        from noetlc.diagnostics.codes import lookup

        info = lookup(code)
        self.findings.append(
            Diagnostic(
                code,
                info.severity,
                message,
                span,
                hint if hint is not None else info.hint,
                trace,
                related,
            )
        )

    def span_of(self, pos: Position) -> Span | None:
        if not pos.line:
            return None
        return Span(self.file, pos.line, pos.column, pos.line, pos.column + 1)

    # ------------------------------------------------------------------ steps and events

    @cached_property
    def places(self) -> dict[str, Place]:
        return {p.id: p for p in self.net.places}

    @cached_property
    def steps(self) -> dict[str, tree.Step]:
        return {s.name: s for s in self.playbook.workflow}

    def done_event(self, step: str) -> str:
        return LOOP_DONE if self.steps[step].loop is not None else STEP_DONE

    def place_events(self, place_id: str) -> tuple[str, ...]:
        """The boundary events a decision place sees (what its transitions can react to)."""
        place = self.places[place_id]
        if place.step is None:
            return ()
        if place.kind == "done":
            return (self.done_event(place.step),)
        if place.kind == "failed":
            return (STEP_FAILED,)
        if place.kind == "waiting":
            return (EventName.SIGNAL_RECEIVED.value, EventName.TIMER_FIRED.value)
        return ()

    def transition_truth(self, t: Transition, event: str | None) -> bool | None:
        if t.pos.path.endswith("eval_mode") or self._is_listener_place(t):
            # a listener's arcs see delivered signals: only constants are decided
            event = None
        if not t.guard.earlier:
            return guard_truth(t.guard, self.pool.entries, event)
        place = t.consume[0]
        key = (place, event)
        truths = self._earlier_truths.get(key)
        if truths is None:
            guards = self.decision_guards[place]
            truths = self._earlier_truths[key] = earlier_truths(guards, self.pool.entries, event)
        first = self._first_rank.get(place)
        if first is None:
            first = self._first_rank[place] = {}
            for rank, g in enumerate(self.decision_guards[place]):
                first.setdefault(g, rank)
        expr = t.guard.expr
        repeats = expr is not None and first.get(expr, t.guard.earlier) < t.guard.earlier
        return guard_truth(t.guard, self.pool.entries, event, truths[t.guard.earlier], repeats)

    @cached_property
    def decision_guards(self) -> dict[str, tuple[int, ...]]:
        return decision_guards(self.net)

    def negations(self, t: Transition) -> tuple[int, ...]:
        """Every guard `t` requires false, spelled out (O(its earlier arcs))."""
        return negations(t, self.decision_guards)

    def _is_listener_place(self, t: Transition) -> bool:
        return bool(t.consume) and t.consume[0].endswith(".waiting")

    def can_fire(self, t: Transition) -> bool:
        """False when the transition is statically dead (see dead_arcs)."""
        if not t.consume:
            return False
        events = self.place_events(t.consume[0])
        if not events or not t.events:
            return self.transition_truth(t, None) is not False
        possible = [e for e in t.events if e in events]
        return any(self.transition_truth(t, e) is not False for e in possible)

    @cached_property
    def transitions_by_place(self) -> dict[str, list[Transition]]:
        out: dict[str, list[Transition]] = {}
        for t in self.net.transitions:
            for p in t.consume:
                out.setdefault(p, []).append(t)
        return out

    def arc_index(self, t: Transition) -> int | None:
        m = _ARC_PATH.search(t.pos.path)
        return int(m.group(1)) if m else None

    # ------------------------------------------------------------------ the step graph

    @cached_property
    def step_graph(self) -> dict[str, list[tuple[str, Transition]]]:
        """step -> [(target step, the live transition that gets there)], dead arcs excluded.
        A join transition links the join's branch places to the join step."""
        graph: dict[str, list[tuple[str, Transition]]] = {s: [] for s in self.steps}
        for t in self.net.transitions:
            if t.kind == "route" and t.step is not None and t.target and self.can_fire(t):
                graph[t.step].append((t.target, t))
        return graph

    @cached_property
    def reachable_steps(self) -> set[str]:
        seen = {self.net.entry_step}
        todo = [self.net.entry_step]
        while todo:
            step = todo.pop()
            for target, _ in self.step_graph.get(step, []):
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    def path_to(self, step: str) -> tuple[TraceStep, ...]:
        """A shortest route from the entry step to `step` (for counterexamples)."""
        parent: dict[str, tuple[str, Transition] | None] = {self.net.entry_step: None}
        queue = [self.net.entry_step]
        for current in queue:
            if current == step:
                break
            for target, t in self.step_graph.get(current, []):
                if target not in parent:
                    parent[target] = (current, t)
                    queue.append(target)
        if step not in parent:
            return ()
        chain: list[TraceStep] = []
        node: str | None = step
        while node is not None:
            link = parent[node]
            if link is None:
                break
            source, t = link
            chain.append(trace_step(self, t, f"{source} -> {t.target}"))
            node = source
        chain.reverse()
        entry = self.steps[self.net.entry_step]
        return (TraceStep(f"start at `{entry.name}`", entry.name_span), *chain)


def trace_step(ctx: LintContext, t: Transition, message: str) -> TraceStep:
    return TraceStep(message, ctx.span_of(t.pos), step=t.step, transition=t.id)
