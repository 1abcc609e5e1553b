"""A mapping's read-only methods in templates (`m.get(k[, d])`, `m.keys()`, `m.values()`,
`m.items()`), as NoETL's jinja2 has them: the compiled path and the jinja2 fallback give the
same value or the same refusal; every other method stays refused."""

from __future__ import annotations

from typing import Any

import pytest

from noetlc.expr.compile import ExpressionUnsafe, compile_expression
from noetlc.expr.runtime import ExpressionError, build_evaluator, compile_entry

VARS: dict[str, Any] = {
    "resp": {"data": {"paging": {"hasMore": True}, "items": [1, 2]}, "status": 200},
    "row": {"name": "a", "score": None, "_secret": 1},
    "words": ["x", "y"],
    "text": "Hello",
}


def _fast(expr: str, variables: dict[str, Any]) -> tuple[str, Any]:
    compiled = compile_expression("{{ " + expr + " }}")
    assert compiled.fast, compiled.slow_reason
    return _evaluate(compile_entry(compiled.to_entry()), variables)


def _slow(expr: str, variables: dict[str, Any]) -> tuple[str, Any]:
    return _evaluate(build_evaluator("jinja_expression", expr, jinja=expr), variables)


def _evaluate(fn: Any, variables: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", fn(dict(variables))
    except ExpressionError as exc:
        return "error", type(exc.cause).__name__


SAME = [
    ("resp.get('status')", 200),
    ("resp.get('missing')", None),
    ("resp.get('missing', 'dflt')", "dflt"),
    ("resp.data.get('paging').get('hasMore')", True),
    ("resp.get('data', {}).get('items', []) | length", 2),
    ("row.get('score', 0)", None),  # present, null: Python's get gives the value
    ("resp.data.keys() | list", ["paging", "items"]),
    ("resp.data.items() | list", [("paging", {"hasMore": True}), ("items", [1, 2])]),
    ("resp.data.values() | length", 2),
    ("resp.data.keys() | length", 2),
    # the method, not the key, though the mapping has an `items` key (the call form)
    ("resp.data.items() | map('first') | list", ["paging", "items"]),
    ("(resp.get('data') or {}).get('items')", [1, 2]),
]


@pytest.mark.parametrize(("expr", "expected"), SAME)
def test_both_paths_give_the_methods_value(expr: str, expected: Any) -> None:
    fast, slow = _fast(expr, VARS), _slow(expr, VARS)
    assert fast == slow
    assert fast == ("ok", expected) or fast == ("ok", [tuple(x) for x in expected])


REFUSED_AT_RUN_TIME = [
    "row.get('_secret')",  # a `_` key, as `row['_secret']`
    "words.get(0)",  # not a mapping
    "text.get('x')",
    "missing.get('x')",  # undefined
    "resp.get()",
    "resp.keys(1)",
]


@pytest.mark.parametrize("expr", REFUSED_AT_RUN_TIME)
def test_both_paths_refuse_alike(expr: str) -> None:
    fast, slow = _fast(expr, VARS), _slow(expr, VARS)
    assert fast[0] == "error"
    assert fast == slow


@pytest.mark.parametrize(
    "expr", ["resp.update({'a': 1})", "resp.pop('status')", "text.upper()", "resp.copy()"]
)
def test_other_methods_stay_refused(expr: str) -> None:
    with pytest.raises(ExpressionUnsafe):
        compile_expression("{{ " + expr + " }}")
    assert _slow(expr, VARS)[0] == "error"


def test_a_mapping_attribute_without_a_call_is_still_the_key() -> None:
    assert _fast("resp.data.items", VARS) == ("ok", [1, 2])
    assert _slow("resp.data.items", VARS) == ("ok", [1, 2])


def test_keyword_arguments_are_refused() -> None:
    with pytest.raises(ExpressionUnsafe):
        compile_expression("{{ resp.get(key='status') }}")
