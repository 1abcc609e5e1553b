"""Expression resource limits: a hostile guard or template fails that evaluation (NOE311),
never the process; the compiler's constant folding has the same limits; the jinja2 slow path
refuses what the compiled path refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from noetlc.cli import noetlc_main
from noetlc.compiler.pipeline import compile_source
from noetlc.expr.compile import ExpressionSyntaxError, ExpressionUnsafe, compile_expression
from noetlc.expr.limits import MAX_NESTING, ExpressionLimit
from noetlc.expr.runtime import ExpressionError, SecurityError, compile_entry
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import MemoryStore

# Each of these allocated a gigabyte or ran for minutes before the limits existed.
OVER_LIMIT = [
    "(10 ** 9999) ** 9999 > 1",
    "(b ** 9999) ** 9999 > 1",
    "10 ** 5000",
    "2 ** 20000",
    "(10 ** 4000) * (10 ** 4000)",
    "'a' * 10 ** 9",
    "10 ** 9 * 'a'",
    "[1] * 10 ** 8",
    "[[1] * 1000] * 1000",
    "'%0999999999d' % 1",
    "'%*d' % (999999999, 1)",
    "'%.999999999f' % 1.5",
    "range(100000) | join('x' * 100)",
    "('x' * 1000) | replace('x', 'y' * 10000)",
    "[1] | tojson(indent=10 ** 9)",
    "range(10 ** 9) | length",
    "range(1000) | map('string') | list | sum(start=[]) if false else 'x' * 1000 * 1001",
]


def _evaluate(text: str, variables: dict[str, Any] | None = None) -> Any:
    return compile_entry(compile_expression(text).to_entry())(dict(variables or {"b": 10}))


@pytest.mark.parametrize("expr", OVER_LIMIT)
def test_the_compiled_path_refuses_huge_values(expr: str) -> None:
    with pytest.raises(ExpressionError) as info:
        _evaluate("{{ " + expr + " }}")
    assert isinstance(info.value.cause, ExpressionLimit)
    assert info.value.code == "NOE311"


@pytest.mark.parametrize("expr", OVER_LIMIT)
def test_the_slow_path_refuses_the_same(expr: str) -> None:
    template = "{% if true %}{{ " + expr + " }}{% endif %}"  # `{% %}`: jinja2's sandbox
    assert compile_expression(template).kind == "jinja_template"
    with pytest.raises(ExpressionError) as info:
        _evaluate(template)
    assert isinstance(info.value.cause, ExpressionLimit), info.value


@pytest.mark.parametrize(
    "template",
    [
        "{{ 'x' | center(10 ** 9) }}",
        "{{ 'x' | indent(10 ** 9) }}",
        "{{ '%0999999999d' | format(1) }}",
        "{{ [1] | batch(10 ** 9, 0) | list }}",
        "{{ [1] | slice(10 ** 9) | list }}",
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "{% set ns = namespace(n=0) %}{% for i in range(100000) %}{% for j in range(100) %}"
        "{% set ns.n = ns.n + 1 %}{% endfor %}{% endfor %}{{ ns.n }}",
    ],
)
def test_padding_filters_and_loops_of_the_slow_path_are_bounded(template: str) -> None:
    with pytest.raises(ExpressionError) as info:
        _evaluate(template)
    assert info.value.code == "NOE311", info.value


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("2 ** 10 * 3", 3072),
        ("'ab' * 3", "ababab"),
        ("[0] * 3", [0, 0, 0]),
        ("'%05d' % 42", "00042"),
        ("7 % 3", 1),
        ("10 ** 1000 > 1", True),
        ("range(100000) | length", 100000),
        ("'x' | center(5)", "  x  "),
        ("range(3) | join(', ')", "0, 1, 2"),
        ("'aXb' | replace('X', '--')", "a--b"),
        ("[[1], [2]] | sum(start=[])", [1, 2]),
    ],
)
def test_values_within_the_limits_are_unchanged(expr: str, value: Any) -> None:
    assert _evaluate("{{ " + expr + " }}") == value
    slow = "{% if true %}{{ (" + expr + ") | tojson }}{% endif %}"
    assert json.loads(_evaluate(slow)) == value


@pytest.mark.parametrize("depth", [MAX_NESTING, 70, 500])
def test_deep_nesting_is_a_syntax_error_not_a_crash(depth: int) -> None:
    text = "{{ " + "(" * depth + "1" + ")" * depth + " }}"
    with pytest.raises(ExpressionSyntaxError, match="nest"):
        compile_expression(text)


@pytest.mark.parametrize(
    "text", ["{{ " + "not " * 3000 + "1 }}", "{{ x" + " | string" * 3000 + " }}"]
)
def test_long_chains_are_a_syntax_error_not_a_crash(text: str) -> None:
    with pytest.raises(ExpressionSyntaxError, match="nested too deeply"):
        compile_expression(text)


def test_a_huge_integer_literal_is_refused_at_compile_time() -> None:
    with pytest.raises(ExpressionUnsafe, match="integer literal"):
        compile_expression("{{ 1" + "0" * 5000 + " }}")


@pytest.mark.parametrize(
    # the read-only mapping methods NoETL's templates use (get, keys, values, items) are
    # allowed (tests/expressions/test_expr_mapping_methods.py); every other call is refused
    "text",
    ["{{ x.update(y) }}", "{{ 'a'.upper() }}", "{{ x.pop('a') | list }}", "a {{ x.clear() }}"],
)
def test_method_calls_are_refused_at_compile_time(text: str) -> None:
    with pytest.raises(ExpressionUnsafe, match="method calls"):
        compile_expression(text)


@pytest.mark.parametrize(
    "template",
    [
        "{% for k in x.popitem() %}{{ k }}{% endfor %}",
        "{% if true %}{{ 'a'.upper() }}{% endif %}",
        "{% if true %}{{ x.setdefault('b', 2) }}{% endif %}",
    ],
)
def test_method_calls_are_refused_by_the_slow_path(template: str) -> None:
    with pytest.raises(ExpressionError) as info:
        _evaluate(template, {"x": {"a": 1}})
    assert isinstance(info.value.cause, SecurityError)


def test_loop_helpers_of_the_slow_path_still_work() -> None:
    assert _evaluate("{% for i in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{% endfor %}") == "aba"


def test_noetlc_expr_reports_noe311(capsys: pytest.CaptureFixture[str]) -> None:
    assert noetlc_main.main(["expr", "{{ 10 ** 5000 }}"]) == 1
    err = capsys.readouterr().err
    assert "error[NOE311]" in err and "NOE900" not in err


_POISON = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: poison, path: poison}
workload: {b: 10, n: 3}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      arcs:
        - step: end
          when: "{{ (workload.b ** 9999) ** 9999 > 1 }}"
        - step: constant
          when: "{{ (10 ** 9999) ** 9999 > 1 }}"
        - step: nested
          when: "{{ ((((((((((((((((((((((((((((((((((1)))))))))))))))))))))))))))))))))) }}"
        - step: end
  - step: constant
    tool: {kind: noop}
  - step: nested
    tool: {kind: noop}
  - step: end
    tool: {kind: noop}
"""


def test_the_compiler_does_not_hang_on_a_poisoned_guard() -> None:
    unit = compile_source(_POISON, "poison.yaml")
    codes = sorted(d.code for d in unit.reporter.diagnostics)
    assert "NOE900" not in codes
    assert "NOE301" in codes  # the nested guard, at its position
    nested = [d for d in unit.reporter.diagnostics if d.code == "NOE301"]
    assert nested[0].span.line == 15


def test_a_poisoned_guard_fails_the_execution_with_noe311() -> None:
    text = _POISON.replace(
        "        - step: nested\n"
        '          when: "{{ ((((((((((((((((((((((((((((((((((1)))))))))))))))))))))))))))))))))) }}"\n',
        "",
    )
    unit = compile_source(text, "poison.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    summary = run_embedded(unit.payload, {}, MemoryStore())
    assert summary["status"] == "failed"
    assert summary["error"]["code"] == "NOE311", summary["error"]
    assert summary["steps"]["start"]["status"] == "done"


_TYPED = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: typed, path: typed}
workload: {n: 3}
workflow:
  - step: start
    loop: {in: "{{ range(workload.n) }}", iterator: i}
    tool: {kind: noop}
    next: end
  - step: end
    tool: {kind: noop}
"""


@pytest.mark.parametrize("n", ["abc", 10**9, "5"])
def test_a_wrongly_typed_workload_value_fails_the_step_not_the_vm(n: Any) -> None:
    unit = compile_source(_TYPED, "typed.yaml")
    summary = run_embedded(unit.payload, {"n": n}, MemoryStore())
    assert summary["status"] == "failed"
    assert summary["error"]["code"] != "NOE850", summary["error"]
    assert summary["steps"]["start"]["status"] == "failed"  # not left `running`


def test_a_loop_over_a_non_list_fails_the_step() -> None:
    unit = compile_source(_TYPED.replace("range(workload.n)", "workload.n"), "typed.yaml")
    summary = run_embedded(unit.payload, {}, MemoryStore())
    assert summary["status"] == "failed"
    assert summary["steps"]["start"]["status"] == "failed"
    assert "must be a list" in summary["error"]["message"]


def test_a_literal_loop_list_iterates() -> None:
    text = _TYPED.replace('"{{ range(workload.n) }}"', "[5, 6]").replace(
        "tool: {kind: noop}\n    next", 'tool: {kind: noop, result: "{{ iter.i * 2 }}"}\n    next'
    )
    unit = compile_source(text, "typed.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    summary = run_embedded(unit.payload, {}, MemoryStore())
    assert summary["status"] == "completed"
    assert summary["steps"]["start"]["result"]["results"] == [10, 12]


def test_a_literal_loop_list_with_templates_is_a_located_error() -> None:
    # an element that is one template is an expression; text around a template is refused
    text = _TYPED.replace('"{{ range(workload.n) }}"', '[1, "n-{{ workload.n }}"]')
    unit = compile_source(text, "typed.yaml")
    [diag] = [d for d in unit.reporter.diagnostics if d.code == "NOE204"]
    assert diag.span.line == 7
