"""Static budgets (`noetlc check --stats`): upper bounds, or "unbounded" with the reason.

* runs per step — 1 for the entry; a merge adds up its sources, an AND-join runs once per
  firing of its fork; a step on a cycle of arcs is unbounded.
* tokens in flight — the largest marking of the plain (unreduced, unordered) state space when
  it fits in a small budget (exact for the abstraction), else the sum of the runs (loose).
* events per execution — per step run: scheduled, the terminal event, one next.selected per
  arc that fires; per task attempt: its done record (+ task.retry; the last call's record is
  folded into the terminal event, so this is an upper bound); a loop step records
  loop.started and loop.done instead of scheduled and two events per iteration. Items count when `in:` is a literal list or a
  workload key with a list default (the request may send more).
* worst-case retry time — the sum of every retry rule's delays over its attempts (backoff,
  max_delay and jitter applied), times the runs and the loop items.
* maximum fan-out — the most arcs one decision fires, and the largest parallel loop window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from noetlc.analysis import soundness
from noetlc.analysis.context import LintContext
from noetlc.analysis.model import build
from noetlc.analysis.statespace import explore
from noetlc.compiler import tree
from noetlc.compiler.ynodes import YScalar, YSeq

EXACT_TOKEN_BUDGET = 20_000
_WORKLOAD_KEY = re.compile(r"^\{\{\s*workload\.(\w+)\s*\}\}$")


@dataclass(frozen=True, slots=True)
class Bound:
    value: float | None  # None: unbounded
    note: str = ""

    def text(self, unit: str = "") -> str:
        if self.value is None:
            return f"unbounded ({self.note})"
        number = f"{self.value:g}" if isinstance(self.value, float) else str(self.value)
        return f"{number}{unit}" + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True, slots=True)
class Budgets:
    tokens: Bound
    events: Bound
    retry_seconds: Bound
    fan_out: Bound
    loop_window: Bound

    def lines(self) -> list[str]:
        return [
            f"tokens in flight:      {self.tokens.text()}",
            f"events per execution:  {self.events.text()}",
            f"worst-case retry wait: {self.retry_seconds.text(' s')}",
            f"maximum fan-out:       {self.fan_out.text(' arcs')}",
            f"parallel loop window:  {self.loop_window.text()}",
        ]

    def to_json(self) -> dict[str, object]:
        return {
            name: {"bound": b.value, "note": b.note}
            for name, b in (
                ("tokens_in_flight", self.tokens),
                ("events_per_execution", self.events),
                ("retry_seconds", self.retry_seconds),
                ("fan_out", self.fan_out),
                ("loop_window", self.loop_window),
            )
        }


def compute(ctx: LintContext) -> Budgets:
    runs, cycle = _runs(ctx)
    items = {s.name: _items(ctx, s) for s in ctx.playbook.workflow}
    return Budgets(
        _tokens(ctx, runs, cycle),
        _events(ctx, runs, cycle, items),
        _retry(ctx, runs, cycle, items),
        _fan_out(ctx),
        _window(ctx),
    )


def _runs(ctx: LintContext) -> tuple[dict[str, int], str | None]:
    graph = ctx.step_graph
    reachable = ctx.reachable_steps
    order: list[str] = []
    state: dict[str, int] = {}
    cycle: str | None = None
    for root in [ctx.net.entry_step]:
        stack = [(root, iter(graph.get(root, [])))]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                order.append(node)
                stack.pop()
                continue
            target = nxt[0]
            if state.get(target) == 1 and cycle is None:
                cycle = f"the arcs {node} -> {target} close a cycle"
            elif target not in state:
                state[target] = 1
                stack.append((target, iter(graph.get(target, []))))
    runs = {s: 0 for s in reachable}
    runs[ctx.net.entry_step] = 1
    joins = {j.step: j for j in ctx.net.joins}
    for step in reversed(order):
        fired: dict[str, int] = {}
        for target, _ in graph.get(step, []):
            fired[target] = fired.get(target, 0) + 1
        for target, n in fired.items():
            many = 1 if _exclusive(ctx, step) else n  # inclusive: every arc may fire
            join = joins.get(target)
            if join is not None and join.kind != "each" and step in join.branches:
                runs[target] = max(runs.get(target, 0), runs[step])
            else:
                runs[target] = runs.get(target, 0) + runs[step] * many
    return runs, cycle


def _exclusive(ctx: LintContext, step: str) -> bool:
    router = ctx.steps[step].next
    return router is None or router.mode == "exclusive"


def _items(ctx: LintContext, step: tree.Step) -> Bound:
    if step.loop is None:
        return Bound(1)
    items = step.loop.items
    if isinstance(items, YSeq):
        return Bound(len(items))
    if isinstance(items, YScalar) and isinstance(items.value, str):
        m = _WORKLOAD_KEY.match(items.value.strip())
        default = ctx.playbook.workload.get(m.group(1)) if m else None
        if isinstance(default, YSeq):
            return Bound(len(default), "with the workload defaults")
    return Bound(None, f"the loop of step `{step.name}` iterates over a runtime value")


def _tokens(ctx: LintContext, runs: dict[str, int], cycle: str | None) -> Bound:
    growing = soundness.shared(ctx).of("unbounded")
    if growing:
        return Bound(None, f"a fork on a cycle at step `{growing[0].step}`")
    system = build(ctx)
    search = explore(system, EXACT_TOKEN_BUDGET, por=False)
    if search.complete:
        return Bound(search.max_tokens)
    if cycle is None:
        return Bound(sum(runs.values()), "loose: the state space is too large to measure")
    return Bound(None, f"too many states to measure and {cycle}")


def _step_events(ctx: LintContext, step: tree.Step) -> Bound:
    arcs = len(step.next.arcs) if step.next is not None else 0
    per_item = 0
    for task in step.tasks:
        attempts = max([1, *(r.action.attempts or 1 for r in _retries(task))])
        per_item += attempts + (attempts - 1)
    if _jump_cycle(step):
        return Bound(None, f"a jump cycle in the pipeline of step `{step.name}`")
    base = 2 + arcs
    if step.loop is None:
        return Bound(base + per_item)
    items = _items(ctx, step)
    if items.value is None:
        return items
    return Bound(base + int(items.value) * (2 + per_item), items.note)


def _events(
    ctx: LintContext, runs: dict[str, int], cycle: str | None, items: dict[str, Bound]
) -> Bound:
    if cycle is not None:
        return Bound(None, cycle)
    total, notes = 2, set()
    for name, n in runs.items():
        bound = _step_events(ctx, ctx.steps[name])
        if bound.value is None:
            return bound
        total += n * int(bound.value)
        if bound.note:
            notes.add(bound.note)
    return Bound(total, ", ".join(sorted(notes)))


def _retries(task: tree.Task) -> list[tree.Rule]:
    rules = task.policy.rules if task.policy is not None else ()
    return [r for r in rules if r.action.do == "retry"]


def _retry_wait(action: tree.Action) -> float:
    total = 0.0
    for i in range(1, (action.attempts or 1)):
        if action.backoff == "linear":
            delay = action.delay * i
        elif action.backoff == "exponential":
            delay = action.delay * 2 ** (i - 1)
        else:
            delay = action.delay
        if action.max_delay is not None:
            delay = min(delay, action.max_delay)
        total += delay * (1 + action.jitter)
    return total


def _retry(
    ctx: LintContext, runs: dict[str, int], cycle: str | None, items: dict[str, Bound]
) -> Bound:
    total, notes = 0.0, set()
    for name, n in runs.items():
        step = ctx.steps[name]
        wait = sum(max([0.0, *(_retry_wait(r.action) for r in _retries(t))]) for t in step.tasks)
        if not wait:
            continue
        if cycle is not None:
            return Bound(None, cycle)
        count = items[name]
        if count.value is None:
            return count
        if count.note:
            notes.add(count.note)
        total += n * count.value * wait
    return Bound(round(total, 3), ", ".join(sorted(notes)))


def _jump_cycle(step: tree.Step) -> bool:
    names = {t.name: i for i, t in enumerate(step.tasks)}
    for i, task in enumerate(step.tasks):
        for rule in task.policy.rules if task.policy is not None else ():
            target = names.get(rule.action.to or "") if rule.action.do == "jump" else None
            if target is not None and target <= i:
                return True
    return False


def _fan_out(ctx: LintContext) -> Bound:
    best, where = 1, ""
    for step in ctx.playbook.workflow:
        if step.next is not None and step.next.mode == "inclusive":
            live = sum(
                1 for t in ctx.step_graph.get(step.name, []) if t[1].consume[0].endswith(".done")
            )
            if live > best:
                best, where = live, f"step `{step.name}`"
    return Bound(best, where)


def _window(ctx: LintContext) -> Bound:
    best, where = 1, ""
    for step in ctx.playbook.workflow:
        if (
            step.loop is not None
            and step.loop.mode == "parallel"
            and step.loop.max_in_flight > best
        ):
            best, where = step.loop.max_in_flight, f"step `{step.name}`"
    return Bound(best, where)
