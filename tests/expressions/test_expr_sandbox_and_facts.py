"""Sandbox refusals in both paths, static facts, constant folding, the pool round trip."""

from __future__ import annotations

import msgpack
import pytest
from jinja2.exceptions import SecurityError

from noetlc.expr.compile import (
    ExpressionPool,
    ExpressionSyntaxError,
    ExpressionUnsafe,
    compile_expression,
)
from noetlc.expr.loader import load_pool
from noetlc.expr.runtime import ExpressionError, compile_entry, slow_expression

ESCAPES = [
    "''.__class__.__mro__",
    "cycler.__init__.__globals__",
    "x.__dict__",
    "x['__class__']",
    "workload._secret",
]


@pytest.mark.parametrize("expr", ESCAPES)
def test_static_escapes_are_refused_at_compile_time(expr: str) -> None:
    with pytest.raises(ExpressionUnsafe):
        compile_expression("{{ " + expr + " }}")


@pytest.mark.parametrize(
    ("expr", "variables"),
    [
        ("x[key]", {"x": {"__class__": 1}, "key": "__class__"}),
        ("lookup(x, '_private')", {"x": {"_private": 1}}),
        ("x | map(attribute='__class__') | list", {"x": [1]}),
        ("s.upper", {"s": "abc"}),
        ("range(10**9) | length", {}),
        ("10 ** 100000", {}),
    ],
)
def test_dynamic_escapes_are_refused_at_run_time(expr: str, variables: dict[str, object]) -> None:
    fn = compile_entry(compile_expression("{{ " + expr + " }}").to_entry())
    with pytest.raises(ExpressionError) as info:
        fn(dict(variables))
    assert isinstance(info.value.cause, (SecurityError, OverflowError))


@pytest.mark.parametrize(
    "expr",
    ["''.__class__.__mro__", "x.__dict__", "cycler.__init__.__globals__", "range(10**9) | length"],
)
def test_slow_path_refuses_too(expr: str) -> None:
    fn = slow_expression(expr)
    try:
        value = fn({"x": {"a": 1}})
    except (SecurityError, OverflowError):
        return
    # jinja2's sandbox answers unsafe attribute access with an undefined value
    assert value is None or type(value).__name__.endswith("Undefined")


def test_no_builtins_are_reachable() -> None:
    fn = compile_entry(compile_expression("{{ open }}").to_entry())
    assert type(fn({})).__name__ == "ChainableUndefined"


def test_event_names_and_mentions() -> None:
    c = compile_expression("{{ event.name == 'loop.done' and ctx.x }}", mode="guard")
    assert c.event_names == ("loop.done",) and c.mentions_event
    c = compile_expression("event.name in ['step.done', 'step.failed']", mode="guard")
    assert c.event_names == ("step.done", "step.failed")
    c = compile_expression("{{ start.amount > 100 }}", mode="guard")
    assert not c.mentions_event and c.names == ("start",)


@pytest.mark.parametrize(
    ("text", "value"),
    [("{{ 1 + 2 }}", 3), ("{{ true and false }}", False), (True, True), ("true", True)],
)
def test_constant_folding(text: object, value: object) -> None:
    c = compile_expression(text, mode="guard")
    assert c.is_constant and c.constant == value


def test_not_constant_when_names_are_free() -> None:
    assert not compile_expression("{{ x }}").is_constant


def test_syntax_errors() -> None:
    for bad in ("{{ x + }}", "{{ (x }}", "{{ x | }}", "{{ }}", "{{ 'unclosed }}"):
        with pytest.raises(ExpressionSyntaxError):
            compile_expression(bad)


def test_guard_accepts_braces_or_not() -> None:
    a = compile_expression("{{ x > 1 }}", mode="guard")
    b = compile_expression("x > 1", mode="guard")
    assert a.code == b.code


def test_pool_dedupes_and_round_trips_through_msgpack() -> None:
    pool = ExpressionPool()
    i = pool.add(compile_expression("{{ x + 1 }}"), ("a",))
    j = pool.add(compile_expression("{{ x + 1 }}"), ("b",))
    k = pool.add(compile_expression("{{ x | string | wordcount }}"), ("c",))  # slow path
    assert i == j != k and pool.by_path[("b",)] == i and len(pool) == 2
    data = msgpack.unpackb(msgpack.packb(pool.to_data()))
    fns = load_pool(data)
    assert fns[i]({"x": 2}) == 3
    assert fns[k]({"x": {"a": 1}}) == 2
    assert pool.index_of("{{ x + 1 }}", "template") == i


def test_generated_code_is_deterministic() -> None:
    assert (
        compile_expression("{{ a.b | default(1) }}").code
        == compile_expression("{{ a.b | default(1) }}").code
    )


REFERENCED = {"$ref": {"store": "results", "key": "e1/start", "size": 2_000_000}}


@pytest.mark.parametrize(
    ("source", "variables", "expected"),
    [
        ("{{ start._ref is defined }}", {"start": REFERENCED}, True),
        ("{{ start._ref is defined }}", {"start": {"rows": [1]}}, False),
        ("{{ start._ref.key }}", {"start": REFERENCED}, "e1/start"),
        ("{{ start._store | default('none') }}", {"start": REFERENCED}, "results"),
        ("{{ start._store | default('none') }}", {"start": {"a": 1}}, "none"),
        ("{% if start._ref %}stored{% else %}inline{% endif %}", {"start": REFERENCED}, "stored"),
        ("{% if start._ref %}stored{% else %}inline{% endif %}", {"start": {"a": 1}}, "inline"),
        # NoETL's preview of a stored result: noetlc keeps none, so it is undefined
        ("{{ start._preview is defined }}", {"start": REFERENCED}, False),
        ("{{ start._preview is defined }}", {"start": {"a": 1}}, False),
        ("{{ start._preview | default('none') }}", {"start": REFERENCED}, "none"),
    ],
)
def test_ref_reads_the_reference_of_a_stored_result(
    source: str, variables: dict[str, object], expected: object
) -> None:
    """`x._ref`, `x._store` and `x._preview` (NoETL's spellings) are the only `_` names
    expressions read: the reference of a result stored by reference, its store and its preview,
    undefined for a result kept inline; other `_` names stay refused."""
    fn = compile_entry(compile_expression(source).to_entry())
    assert fn(dict(variables)) == expected
    with pytest.raises(ExpressionUnsafe):
        compile_expression("{{ start._payload }}")
