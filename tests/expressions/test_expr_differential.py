"""Differential tests: compiled expressions give jinja2's value or raise jinja2's error class.

The reference is jinja2's ImmutableSandboxedEnvironment with ChainableUndefined (the same
environment the slow path uses), evaluated with `compile_expression` for single expressions
and `render` for mixed templates.
"""

from __future__ import annotations

import re
from typing import Any

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import ChainableUndefined, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from noetlc.expr.compile import compile_expression
from noetlc.expr.library import lookup
from noetlc.expr.runtime import ExpressionError, compile_entry
from noetlc.expr.sandbox import _flatten
from tests.conftest import CONFORMANCE_CASES, NOETL_FILES


class _NoetlProxyEnvironment(ImmutableSandboxedEnvironment):
    """jinja2 with NoETL's result proxy rule (docs/expressions.md): `.data` of a mapping
    without a `data` key is the mapping itself."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if attribute == "data" and type(obj) is dict and "data" not in obj:
            return obj
        return super().getattr(obj, attribute)


ENV = _NoetlProxyEnvironment(undefined=ChainableUndefined)
ENV.globals["lookup"] = lookup
ENV.filters["bool"] = bool  # an extension of ours (jinja2 has no `bool` filter)

VARS: dict[str, Any] = {
    "workload": {
        "numbers": [1, 2, 3],
        "api_url": "http://x",
        "pages": 3,
        "name": "World",
        "n": "7",
    },
    "ctx": {"count": 2, "seen": [10, 11], "has_more": True, "page": 1, "total": 0.5},
    "iter": {"page": 2, "has_more": False, "city": {"name": "Paris", "temp": 21.5}, "index": 0},
    "args": {"v": 7, "left": {"v": 10}},
    "event": {"name": "loop.done", "step": "start", "data": {"count": 3}},
    "outcome": {
        "status": "error",
        "result": {"items": [{"id": 1, "ok": True}, {"id": 2, "ok": False}], "has_more": True},
        "error": {"type": "RuntimeError", "message": "boom"},
        "http": {"status": 503, "headers": {"retry-after": "2"}},
    },
    "output": {
        "status": "ok",
        "data": {"paging": {"page": 2, "hasMore": False}, "rows": [{"c": "5"}]},
    },
    "start": {"word": "HELLO", "amount": 50, "rows": [1, 2]},
    "words": ["beta", "alpha", "Gamma", "alpha"],
    "users": [{"name": "b", "age": 30}, {"name": "a", "age": 20}],
    "s": "  Hello World  ",
    "x": 5,
    "y": 2.5,
    "none_value": None,
    "flag": False,
}

HAND_WRITTEN = [
    "event.name == 'loop.done'",
    "event.name == 'step.failed'",
    "outcome.status == 'error' and outcome.http.status in [429, 503]",
    "outcome.status == 'error' and outcome.py.exception_type == 'RuntimeError'",
    "ctx.count | default(0) > 10",
    "(ctx.total | default(0)) + 1",
    "iter.has_more == true",
    "(iter.page | int) + 1",
    "ctx.seen + outcome.result['items']",
    "outcome.result.has_more",
    "output.data.paging.page | default(iter.page)",
    "output.data.paging.hasMore | default(false)",
    "output.data.items | default([])",
    "(output.data.rows[0].c | default(0) | int) >= (workload.n | int)",
    "start.amount > 100",
    "start.word ~ ' ' ~ start.word",
    "workload.numbers | length > 0",
    "missing | default('fallback')",
    "missing.deeper.still | default(3)",
    "missing is defined",
    "missing is not defined",
    "x is divisibleby 5",
    "x is odd",
    "none_value is none",
    "not flag",
    "x if flag else y",
    "x if flag",
    "words | sort",
    "words | unique | list",
    "words | join(', ')",
    "words | first",
    "words | last",
    "words | map('upper') | list",
    "users | map(attribute='name') | list",
    "users | selectattr('age', 'gt', 25) | list",
    "users | rejectattr('age', 'gt', 25) | map(attribute='name') | join",
    "users | sort(attribute='age') | first",
    "users | min(attribute='age')",
    "users | max(attribute='age')",
    "users | sum(attribute='age')",
    "[3, 1, 2] | sum",
    "[3, 1, 2] | min",
    "y | round",
    "-x | abs",
    "s | trim | lower",
    "s | upper",
    "s | replace('World', 'There')",
    "workload.n | int + 1",
    "'3.5' | float",
    "x | string ~ '!'",
    "x | bool",
    "{'a': 1, 'b': [1, 2]} | tojson",
    "outcome.result | tojson",
    "range(3) | list",
    "range(1, 10, 3) | list",
    "dict(a=1, b=2)",
    "lookup(outcome, 'result.items.0.id')",
    "lookup(outcome, 'result.nope', 'd')",
    "x // 2",
    "x % 3",
    "x / 2",
    "2 ** 3 ** 2",
    "x * y - 1",
    "1 < x < 10",
    "x != 5",
    "'a' in 'abc'",
    "'z' not in ['a', 'b']",
    "(1, 2)",
    "[1, 2][1]",
    "workload.numbers[1:]",
    "workload.numbers[::-1]",
    "'a' 'b'",
    "\"quote's\" ~ 'x'",
    "true and none",
    "false or 'x'",
    "x and y",
    "args.left.v + args.v",
    "iter.city.name | lower",
    "event.data.count * 2",
    "outcome.http.headers['retry-after'] | int",
    "start.rows | length",
    "words | reverse | list",
    "users[0].name",
    "x > missing",
    "missing + 1",
    "'a' + 1",
    "x.bar.baz",
    "{'k': missing} ",
]


def _reference(expr: str, variables: dict[str, Any]) -> tuple[str, Any]:
    try:
        value = ENV.compile_expression(expr, undefined_to_none=False)(**_flatten(variables))
        if callable(value) and not isinstance(value, Undefined):
            # Intended difference (docs/expressions.md): on a mapping, `.items`/`.keys`/...
            # read the key; jinja2 returns the bound method (and a key that does not exist
            # is undefined). Compare with that reading.
            return "method", None
        return "ok", _normal(value)
    except Exception as exc:
        return "error", type(exc).__name__


def _ours(text: str, variables: dict[str, Any], mode: str = "template") -> tuple[str, Any]:
    compiled = compile_expression(text, mode=mode)  # type: ignore[arg-type]
    try:
        value = compile_entry(compiled.to_entry())(dict(variables))
        return "ok", _normal(value)
    except ExpressionError as exc:
        return "error", type(exc.cause).__name__


def _same(ours: tuple[str, Any], reference: tuple[str, Any]) -> bool:
    if reference[0] == "method":
        return ours[0] == "ok"
    return ours == reference


def _normal(value: Any) -> Any:
    if isinstance(value, Undefined):
        return "<undefined>"
    if isinstance(value, range):
        return list(value)
    return value


@pytest.mark.parametrize("expr", HAND_WRITTEN)
def test_hand_written_expressions_match_jinja(expr: str) -> None:
    compiled = compile_expression("{{ " + expr + " }}")
    assert compiled.fast, compiled.slow_reason
    assert _same(_ours("{{ " + expr + " }}", VARS), _reference(expr, VARS))


@pytest.mark.parametrize(
    "template",
    [
        "Hello {{ workload.name }}!",
        "{{ workload.api_url }}/items/{{ iter.page }}",
        "a {{ missing }} b",
        "{{ none_value }} and {{ flag }}",
        "{{ x }}{{ y }}",
        "{{- x -}}   {{ y }}",
        "{{ '}}' }} braces",
        "{{ users | map(attribute='name') | join(',') }} users",
        "{{ outcome.result }}",
    ],
)
def test_mixed_templates_render_like_jinja(template: str) -> None:
    compiled = compile_expression(template + ".")  # trailing text keeps it a mixed template
    ours = compile_entry(compiled.to_entry())(dict(VARS))
    assert ours == ENV.from_string(template + ".").render(**VARS)


def test_single_expression_template_yields_the_native_value() -> None:
    compiled = compile_expression("{{ workload.numbers }}")
    assert compile_entry(compiled.to_entry())(dict(VARS)) == [1, 2, 3]
    compiled = compile_expression("  {{ x + 1 }} ")
    assert compile_entry(compiled.to_entry())(dict(VARS)) == 6


def _corpus_expressions() -> list[str]:
    """The one-line expressions of the conformance cases and, when present, the NoETL corpus."""
    found: set[str] = set()
    for path in CONFORMANCE_CASES + NOETL_FILES:
        for m in re.finditer(r"\{\{(.*?)\}\}", path.read_text(encoding="utf-8")):
            expr = m.group(1).strip().replace("''", "'")
            if "\n" not in expr:
                found.add(expr)
    return sorted(found)


CORPUS = _corpus_expressions()


def test_every_corpus_expression_is_on_the_fast_path() -> None:
    slow = []
    for expr in CORPUS:
        try:
            compiled = compile_expression("{{ " + expr + " }}")
        except Exception as exc:
            slow.append((expr, f"{type(exc).__name__}: {exc}"))
            continue
        if not compiled.fast:
            slow.append((expr, compiled.slow_reason))
    assert not slow, slow


@pytest.mark.parametrize("expr", CORPUS)
def test_corpus_expressions_match_jinja(expr: str) -> None:
    if expr.startswith("_") or "._" in expr:
        pytest.skip("underscore names are refused by our sandbox only as attributes")
    assert _same(_ours("{{ " + expr + " }}", VARS), _reference(expr, VARS))


# ---------------------------------------------------------------- generated expressions

_names = st.sampled_from(["x", "y", "flag", "none_value", "missing", "ctx.count", "words", "s"])
_literals = st.one_of(
    st.integers(-5, 5).map(str),
    st.sampled_from(["1.5", "'a'", '"b"', "true", "false", "none", "[1, 2]", "{'k': 1}"]),
)
_filters = st.sampled_from(
    [
        "default(0)",
        "int",
        "string",
        "length",
        "lower",
        "upper",
        "first",
        "last",
        "list",
        "abs",
        "bool",
    ]
)


def _build(draw: Any, depth: int) -> str:
    if depth <= 0:
        return str(draw(st.one_of(_names, _literals)))
    shape = draw(st.integers(0, 6))
    a = _build(draw, depth - 1)
    if shape == 0:
        return f"({a} {draw(st.sampled_from(['+', '-', '*', '==', '!=', '<', 'and', 'or', '~', 'in']))} {_build(draw, depth - 1)})"
    if shape == 1:
        return f"({a} | {draw(_filters)})"
    if shape == 2:
        return f"(not {a})"
    if shape == 3:
        return f"({a} if {_build(draw, depth - 1)} else {_build(draw, depth - 1)})"
    if shape == 4:
        return f"({a} is {draw(st.sampled_from(['defined', 'none', 'number', 'string', 'odd']))})"
    if shape == 5:
        return f"[{a}, {_build(draw, depth - 1)}][{draw(st.integers(-2, 2))}]"
    return a


@st.composite
def expressions(draw: Any) -> str:
    return _build(draw, draw(st.integers(0, 3)))


@settings(max_examples=400, deadline=None)
@given(expressions())
def test_generated_expressions_match_jinja(expr: str) -> None:
    assert _same(_ours("{{ " + expr + " }}", VARS), _reference(expr, VARS)), expr


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["x", "y", "s"]),
        st.one_of(
            st.integers(),
            st.text(max_size=5),
            st.none(),
            st.booleans(),
            st.lists(st.integers(), max_size=3),
        ),
    ),
    st.sampled_from(
        [
            "x + 1",
            "x ~ y",
            "x | default(s)",
            "x | length",
            "x == y",
            "x | int",
            "[x, y] | select | list",
        ]
    ),
)
def test_generated_variables_match_jinja(variables: dict[str, Any], expr: str) -> None:
    assert _same(_ours("{{ " + expr + " }}", variables), _reference(expr, variables))


def test_mapping_attributes_read_keys_not_methods() -> None:
    # Intended difference from jinja2: `.items` on a mapping is the key (jinja2: the method).
    variables = {"data": {"items": [1, 2]}, "empty": {}}
    assert _ours("{{ data.items | length }}", variables) == ("ok", 2)
    assert _ours("{{ empty.items | default([]) }}", variables) == ("ok", [])


def test_reference_environment_is_sandboxed() -> None:
    assert isinstance(ENV, jinja2.sandbox.SandboxedEnvironment)
