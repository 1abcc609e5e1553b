"""Guard and template evaluation: jinja2 vs compiled code vs a hand-written lambda.

Run: `python -m bench -k expressions` (or pytest: `-m bench --benchmark-enable`).
Each guard's figure is its compiled evaluation against the hand-written lambda (target ≤ 3×);
one more figure compares the six with jinja2 (≥ 30× faster).
"""

from __future__ import annotations

import functools
import timeit
from collections.abc import Callable
from typing import Any

import pytest
from jinja2 import ChainableUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from noetlc.bench.figures import quick, record, target
from noetlc.expr.compile import compile_expression
from noetlc.expr.runtime import compile_entry
from noetlc.ir.events import EventName

pytestmark = pytest.mark.bench

SCOPE: dict[str, Any] = {
    "event": {"name": EventName.LOOP_DONE.value, "step": "start", "data": {}},
    "outcome": {"status": "error", "result": None, "http": {"status": 503}},
    "ctx": {"count": 12, "page": 3},
    "iter": {"has_more": True, "page": 2},
    "workload": {"api_url": "http://127.0.0.1:8000", "items": [1, 2, 3]},
}

# (name, expression, hand-written equivalent)
CASES: list[tuple[str, str, Callable[[dict[str, Any]], Any]]] = [
    (
        "event name",
        "event.name == 'loop.done'",
        lambda s: s["event"]["name"] == EventName.LOOP_DONE.value,
    ),
    (
        "http retry",
        "outcome.status == 'error' and outcome.http.status in [429, 503]",
        lambda s: (
            s["outcome"]["status"] == "error" and s["outcome"]["http"]["status"] in [429, 503]
        ),
    ),
    ("default cmp", "ctx.count | default(0) > 10", lambda s: s["ctx"].get("count", 0) > 10),
    ("has_more", "iter.has_more == true", lambda s: s["iter"]["has_more"] is True),
    ("page+1", "(iter.page | int) + 1", lambda s: int(s["iter"]["page"]) + 1),
    (
        "url",
        "workload.api_url ~ '/items/' ~ iter.page",
        lambda s: f"{s['workload']['api_url']}/items/{s['iter']['page']}",
    ),
]

_ENV = ImmutableSandboxedEnvironment(undefined=ChainableUndefined)


def _per_call_ns(fn: Callable[[], Any], number: int) -> float:
    best = min(timeit.repeat(fn, number=number, repeat=5))
    return best / number * 1e9


def measure() -> list[dict[str, Any]]:
    rows = []
    for name, expr, hand in CASES:
        jinja = _ENV.compile_expression(expr)
        ours = compile_entry(compile_expression("{{ " + expr + " }}").to_entry())
        assert ours(dict(SCOPE)) == jinja(**SCOPE) == hand(SCOPE)
        scope = dict(SCOPE)
        scale = 10 if quick() else 1
        j = _per_call_ns(functools.partial(jinja, **SCOPE), 2_000 // scale)
        o = _per_call_ns(functools.partial(ours, scope), 50_000 // scale)
        h = _per_call_ns(functools.partial(hand, scope), 50_000 // scale)
        rows.append({"name": name, "jinja_ns": j, "compiled_ns": o, "lambda_ns": h})
    return rows


@pytest.mark.parametrize(("name", "expr", "hand"), CASES, ids=[c[0] for c in CASES])
def test_guard(benchmark: Any, name: str, expr: str, hand: Callable[[dict[str, Any]], Any]) -> None:
    """The compiled guard, timed by pytest-benchmark; the figure compares it with the
    hand-written lambda timed the same way (timeit, best of 5) in the same test."""
    fn = compile_entry(compile_expression("{{ " + expr + " }}").to_entry())
    scope = dict(SCOPE)
    benchmark(fn, scope)
    number = 5_000 if quick() else 50_000
    ours = _per_call_ns(functools.partial(fn, scope), number)
    lam = _per_call_ns(functools.partial(hand, scope), number)
    record(
        benchmark,
        figure=f"guard `{expr}`",
        value=ours,
        unit="ns",
        against="hand-written lambda",
        against_value=lam,
        target=target("ratio", "<=", 3, "target: within 3× of a lambda"),
    )


def test_guards_vs_jinja2(benchmark: Any) -> None:
    """All six guards, compiled vs jinja2's `compile_expression`, in one figure (the sum)."""
    rows = benchmark.pedantic(measure, rounds=1, iterations=1)
    record(
        benchmark,
        figure="6 guards, compiled (sum of one evaluation each)",
        value=sum(r["compiled_ns"] for r in rows),
        unit="ns",
        against="jinja2 compile_expression",
        against_value=sum(r["jinja_ns"] for r in rows),
        target=target("ratio", "<=", 1 / 30, "≥ 30× faster than jinja2"),
    )
