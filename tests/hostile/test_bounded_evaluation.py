"""Bounded evaluation: every operation that grows a value (`~`, `+`, `*`, `%`, `**`, joins,
padding filters, the text a `{% for %}` renders) is checked before it computes, one
evaluation builds at most `MAX_BUILT` characters and items in all, and going over is NOE311
(a limit), never MemoryError (NOE310) or an internal error (NOE900). The payloads here are
small versions of ones that reached gigabytes; `bench/test_bench_poison.py` measures the
real ones (peak memory, and the delay a poison execution causes a healthy one)."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from noetlc.cli import noetlc_main
from noetlc.compiler.pipeline import compile_source
from noetlc.expr.compile import compile_expression
from noetlc.expr.limits import MAX_BUILT, MAX_INT_BITS, MAX_SIZE, ExpressionLimit
from noetlc.expr.runtime import ExpressionError, compile_entry

SLOW = "{% if true %}{% endif %}"  # a `{% %}` block sends a template to jinja2's sandbox

# One value over MAX_SIZE, or over MAX_INT_BITS, made by one operation.
OVER_ONE_VALUE = [
    "3 ** 14000",
    "10 ** 4300",
    "(-3) ** 14000",
    "7 ** 5000",
    "('x' * 600000) ~ ('x' * 600000)",
    "('x' * 600000) + ('x' * 600000)",
    "((range(90000) | list) * 5) + ((range(90000) | list) * 5) + (range(90000) | list)",
    "(([0] * 2), 2) + (([0] * 2), 2) if false else ('x' * 999999) ~ 'yy'",
]

# Many values, each within MAX_SIZE, together over MAX_BUILT.
OVER_THE_EVALUATION = [
    "[" + ", ".join(["'x' * 900000"] * 10) + "] | length",
    "[" + ", ".join(["[0] * 400000"] * 10) + "] | length",
    "[" + ", ".join(["range(100000) | list"] * 25) + "] | length",
    "[" + ", ".join(["('x' * 900000) | upper"] * 5) + "] | length",
]


def _evaluate(text: str, variables: dict[str, Any] | None = None) -> Any:
    return compile_entry(compile_expression(text).to_entry())(dict(variables or {}))


def _refused(text: str, variables: dict[str, Any] | None = None) -> ExpressionError:
    with pytest.raises(ExpressionError) as info:
        _evaluate(text, variables)
    assert isinstance(info.value.cause, ExpressionLimit), info.value
    assert info.value.code == "NOE311"
    return info.value


@pytest.mark.parametrize("expr", OVER_ONE_VALUE + OVER_THE_EVALUATION)
def test_the_compiled_path_refuses_before_it_builds(expr: str) -> None:
    assert compile_expression("{{ " + expr + " }}").kind == "code"
    _refused("{{ " + expr + " }}")


@pytest.mark.parametrize("expr", OVER_ONE_VALUE + OVER_THE_EVALUATION)
def test_the_slow_path_refuses_the_same(expr: str) -> None:
    template = SLOW + "{{ " + expr + " }}"
    assert compile_expression(template).kind == "jinja_template"
    _refused(template)


def test_mixed_text_is_bounded_like_concatenation() -> None:
    _refused("{{ 'x' * 600000 }}-{{ 'x' * 600000 }}")
    _refused("{{ x }}{{ x }}", {"x": "y" * 600000})


# Loops of the slow path: each reached gigabytes (or ran past the server's deadline) before.
SLOW_LOOPS = [
    # `~` doubling a string
    "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
    "{% endfor %}{{ ns.s | length }}",
    # `+` doubling a string and a list
    "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
    "{% endfor %}{{ ns.s | length }}",
    "{% set ns = namespace(s=[1]) %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
    "{% endfor %}{{ ns.s | length }}",
    # the text a loop renders
    "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",
    "{% set t %}{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}{% endset %}"
    "{{ t | length }}",
    # many values, each within the limits
    SLOW + "{{ range(100000) | map('center', 100000) | list | length }}",
    "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
    "{% set ns.l = ns.l + ['x' * 100000] %}{% endfor %}{{ ns.l | length }}",
    # a structure that shares itself: its text doubles at each level
    "{% set ns = namespace(a=[1]) %}{% for i in range(40) %}{% set ns.a = [ns.a, ns.a] %}"
    "{% endfor %}{{ ns.a }}",
    "{% set ns = namespace(a=[1]) %}{% for i in range(40) %}{% set ns.a = [ns.a, ns.a] %}"
    "{% endfor %}{{ ns.a | tojson | length }}",
    "{% set ns = namespace(a=[1]) %}{% for i in range(40) %}{% set ns.a = [ns.a, ns.a] %}"
    "{% endfor %}{{ ns.a ~ '' }}",
]


@pytest.mark.parametrize("template", SLOW_LOOPS)
def test_slow_path_loops_are_refused_with_noe311_within_64_mb(template: str) -> None:
    tracemalloc.start()
    try:
        _refused(template)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MB"


def test_a_structure_that_shares_itself_is_not_returned_whole() -> None:
    # the native value of a single expression goes to the log as JSON: bounded the same way
    template = (
        "{% set ns = namespace(a=[1]) %}{% for i in range(40) %}{% set ns.a = [ns.a, ns.a] %}"
        "{% endfor %}{{ ns.a }}"
    )
    _refused(template)


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("3 ** 8000 > 1", True),
        ("10 ** 4200 > 10 ** 4199", True),
        ("(2 ** 13999) | string | length", 4215),
        ("'ab' ~ 'cd' ~ 1", "abcd1"),
        ("'ab' + 'cd'", "abcd"),
        ("[1] + [2]", [1, 2]),
        ("(1, 2) + (3,)", [1, 2, 3]),
        ("1 + 2", 3),
        ("1.5 + 2", 3.5),
        ("(('x' * 500000) ~ ('x' * 500000)) | length", 1000000),
    ],
)
def test_values_within_the_limits_are_unchanged(expr: str, value: Any) -> None:
    fast = _evaluate("{{ " + expr + " }}")
    slow = _evaluate(SLOW + "{{ " + expr + " }}")
    expected = value if not isinstance(value, list) else tuple(value)
    assert (list(fast) if isinstance(fast, tuple) else fast) == value
    assert slow == str(value if not isinstance(value, list) else expected) or slow == str(value)


def test_the_budget_is_per_evaluation_not_per_process() -> None:
    build = compile_entry(compile_expression("{{ ('x' * 900000) | length }}").to_entry())
    slow = compile_entry(compile_expression(SLOW + "{{ ('x' * 900000) | length }}").to_entry())
    for _ in range(3 * MAX_BUILT // 900000):
        assert build({}) == 900000
        assert slow({}) == "900000"


def test_a_loop_that_renders_within_the_limits_still_renders() -> None:
    out = _evaluate("{% for i in range(1000) %}{{ i }},{% endfor %}")
    assert out.count(",") == 1000
    out = _evaluate(
        "{% set ns = namespace(l=[]) %}{% for i in range(500) %}{% set ns.l = ns.l + [i] %}"
        "{% endfor %}{{ ns.l | length }}"
    )
    assert out == "500"


def test_the_limits_leave_room_for_what_they_promise() -> None:
    assert MAX_SIZE <= MAX_BUILT and MAX_INT_BITS * 3 // 10 < 4300


@pytest.mark.parametrize("expr", ["{{ 3 ** 14000 }}", "{{ 10 ** 4300 }}"])
def test_noetlc_expr_reports_noe311_for_powers(
    expr: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert noetlc_main.main(["expr", expr]) == 1
    err = capsys.readouterr().err
    assert "error[NOE311]" in err and "NOE900" not in err, err


def test_constant_folding_refuses_the_same_powers() -> None:
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p, path: t/p}\n"
        "workflow:\n  - step: start\n    tool: {kind: noop}\n    next:\n      arcs:\n"
        "        - {step: end, when: '{{ 3 ** 14000 > 1 }}'}\n        - {step: end}\n"
        "  - step: end\n    tool: {kind: noop}\n"
    )
    unit = compile_source(text, "p.yaml")
    assert "NOE900" not in {d.code for d in unit.reporter.diagnostics}


@pytest.mark.parametrize(
    "expr",
    [
        "x ~ (x ~ (x ~ (x ~ (x ~ x))))",  # nested f-strings did not load (Python's limit)
        "(((((x ~ x) ~ x) ~ x) ~ x) ~ x)",
        "[" * 30 + "x ~ x" + "]" * 30,
        "((x ~ x) + " * 20 + "x" + ")" * 20,
        "(x ~ x" + " | upper ~ x" * 100 + ")",
    ],
)
def test_concatenations_compile_and_load_at_any_accepted_depth(expr: str) -> None:
    compiled = compile_expression("{{ " + expr + " }}")
    assert compiled.kind == "code"
    assert _evaluate("{{ " + expr + " }}", {"x": "ab"}) is not None
