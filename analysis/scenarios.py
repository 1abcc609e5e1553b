"""Guards fixed for a whole execution: the ones that read only `workload` (and literals).

The workload never changes while an execution runs, so such a guard takes the same value at
every decision — on every turn of a cycle too. Abstracting it to "either way" per decision
lets a cycle leave by a guard that, in a real execution, never changes (a loop that never
ends, or a join inside a cycle that waits forever), and lets two arcs that test the same input
disagree. A *scenario* is one consistent assignment of every fixed guard: the soundness check
runs once per scenario (when the abstract check needs it, see `soundness.shared`), and each
finding names the workload values of its scenario.

The scenarios come from evaluating the guards on representative workload values: for each
workload key the guards read, its default, both booleans, and each literal a guard compares
it with (and that literal plus or minus one, so `<`, `==` and `>` each get a witness). When
the product of those domains is too large, each fixed guard becomes an independent boolean
(more scenarios than real, never fewer); past `MAX_GUARDS` guards nothing is fixed and the
check keeps "either way" (a note says so).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from noetlc.analysis.context import LintContext
from noetlc.expr.compile import CompiledExpression
from noetlc.expr.runtime import compile_entry

MAX_COMBINATIONS = 4_096  # workload values tried
MAX_GUARDS = 8  # independent booleans beyond this many guards: too many scenarios
MAX_SCENARIOS = 64

_KEY = re.compile(r"\bworkload\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_STRING = re.compile(r"'([^'\\]*)'|\"([^\"\\]*)\"")


@dataclass(frozen=True, slots=True)
class Scenario:
    values: dict[int, bool]  # pool index of a fixed guard -> its value
    workload: dict[str, Any]  # workload values that give it (empty: independent booleans)
    # guards that also test `event.name`: (pool index, event) -> the value at that event
    events: dict[tuple[int, str], bool] = field(default_factory=dict)

    def describe(self, ctx: LintContext) -> str:
        if self.workload:
            return ", ".join(f"workload.{k} = {_show(v)}" for k, v in sorted(self.workload.items()))
        pool = ctx.pool.entries
        return ", ".join(
            f"`{pool[i].source.strip()}` is {'true' if v else 'false'}"
            for i, v in sorted(self.values.items())
        )


def _show(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    return repr(value) if isinstance(value, str) else str(value)


def fixed_guards(ctx: LintContext) -> list[int]:
    """Pool indexes of the routing and admission guards that read only the workload."""
    cached = ctx.computed.get("fixed_guards")
    if cached is not None:
        assert isinstance(cached, list)
        return cached
    pool = ctx.pool.entries
    used: set[int] = set()
    for t in ctx.net.transitions:
        if t.guard.expr is not None:
            used.add(t.guard.expr)
        used.update(t.guard.negated)
    for guards in ctx.decision_guards.values():
        used.update(guards)
    out = sorted(i for i in used if _fixed(pool[i]))
    ctx.computed["fixed_guards"] = out
    return out


_EVENT_TEST = re.compile(r"""\bevent\s*\.\s*name\s*[!=]=\s*('[^']*'|"[^"]*")""")
_EVENT_FIELD = re.compile(r"\bevent\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")


def _fixed(entry: CompiledExpression) -> bool:
    return (
        not entry.is_constant
        and bool(entry.names)
        and set(entry.names) <= {"workload"}
        and not entry.text_template
    ) or _event_fixed(entry)


def _event_fixed(entry: CompiledExpression) -> bool:
    """A guard that reads the workload and only the name of the event (a failing step's arcs:
    `event.name == 'step.done' and (workload.b0)`): fixed for the execution at each event."""
    return (
        not entry.is_constant
        and set(entry.names) == {"workload", "event"}
        and not entry.text_template
        and entry.kind == "code"
        and set(_EVENT_FIELD.findall(entry.source)) == {"name"}
    )


def scenarios(ctx: LintContext) -> list[Scenario] | None:
    """Every consistent assignment of the fixed guards; None when there are too many."""
    guards = fixed_guards(ctx)
    if not guards:
        return []
    pool = ctx.pool.entries
    domains = _domains(ctx, [pool[i].source for i in guards])
    size = 1
    for d in domains.values():
        size *= len(d)
    if size <= MAX_COMBINATIONS:
        found = _evaluated(ctx, guards, domains)
        if found is not None and len(found) <= MAX_SCENARIOS:
            return found
    plain = [i for i in guards if not _event_fixed(pool[i])]  # the others stay either way
    if len(plain) > MAX_GUARDS:
        return None
    return [
        Scenario(dict(zip(plain, values, strict=True)), {})
        for values in itertools.product((False, True), repeat=len(plain))
    ]


def _domains(ctx: LintContext, sources: list[str]) -> dict[str, list[Any]]:
    defaults = _workload_defaults(ctx)
    domains: dict[str, list[Any]] = {}
    for source in sources:
        source = _EVENT_TEST.sub("", source)  # an event's name is no workload value
        keys = _KEY.findall(source)
        literals: list[Any] = []
        for m in _NUMBER.finditer(source):
            n = float(m.group()) if "." in m.group() else int(m.group())
            literals.extend((n - 1, n, n + 1))
        literals.extend(a or b for a, b in _STRING.findall(source))
        for key in keys:
            domain = domains.setdefault(key, [])
            for value in (defaults.get(key), False, True, *literals):
                if not any(value == v and type(value) is type(v) for v in domain):
                    domain.append(value)
    return domains


def _workload_defaults(ctx: LintContext) -> dict[str, Any]:
    try:
        value = ctx.playbook.workload.to_python()
    except Exception:  # a workload that is not a mapping: the front end reported it
        return {}
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def _evaluated(
    ctx: LintContext, guards: list[int], domains: dict[str, list[Any]]
) -> list[Scenario] | None:
    pool = ctx.pool.entries
    try:
        evaluators = [compile_entry(pool[i].to_entry()) for i in guards]
    except Exception:
        return None
    keys = sorted(domains)
    defaults = _workload_defaults(ctx)
    events = sorted({e for t in ctx.net.transitions for e in t.events})
    # (guard, event or None): a guard that tests the event's name is evaluated at each event
    probes = [
        (i, evaluate, e)
        for i, evaluate in zip(guards, evaluators, strict=True)
        for e in (events if _event_fixed(pool[i]) else [None])
    ]
    seen: dict[tuple[bool, ...], Scenario] = {}
    for values in itertools.product(*(domains[k] for k in keys)):
        workload = {**defaults, **dict(zip(keys, values, strict=True))}
        vector: list[bool] = []
        for _, evaluate, event in probes:
            scope: dict[str, Any] = {"workload": workload}
            if event is not None:
                scope["event"] = {"name": event}
            try:
                vector.append(bool(evaluate(scope)))
            except Exception:
                if event is not None:
                    return None  # not decidable at this event: no scenarios at all
                break  # the VM would fail this execution at the guard: not a scenario
        else:
            key = tuple(vector)
            if key not in seen:
                shown = dict(zip(keys, values, strict=True))
                plain = {i: v for (i, _, e), v in zip(probes, key, strict=True) if e is None}
                by_event = {
                    (i, e): v for (i, _, e), v in zip(probes, key, strict=True) if e is not None
                }
                seen[key] = Scenario(plain, shown, by_event)
    return list(seen.values())
