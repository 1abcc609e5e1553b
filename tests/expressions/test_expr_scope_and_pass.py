"""The scope contract (references, errors with positions), single-vs-mixed templates, the
slow path's refusals, and the expressions pass (pool paths, NOE305, the corpus)."""

from __future__ import annotations

from typing import Any

import pytest
from jinja2 import ChainableUndefined, Undefined
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from noetlc.compiler.pipeline import compile_source
from noetlc.expr.compile import (
    ExpressionPool,
    ExpressionSyntaxError,
    ExpressionUnsafe,
    compile_expression,
)
from noetlc.expr.runtime import (
    RESOLVER_KEY,
    ExpressionError,
    compile_entry,
    slow_expression,
)
from noetlc.expr.sandbox import _flatten
from tests.conftest import CONFORMANCE_CASES, NOETL_FILES

JINJA = ImmutableSandboxedEnvironment(undefined=ChainableUndefined)


def _eval(text: str, scope: dict[str, Any], mode: str = "template") -> Any:
    return compile_entry(compile_expression(text, mode=mode).to_entry())(scope)  # type: ignore[arg-type]


# ---------------------------------------------------------------- single vs mixed templates


@pytest.mark.parametrize(
    "text",
    ["{{ a }} and {{ b }}", "{{ a }} and b }}", "x {{ a }}", "{{ a }}{{ b }}"],
)
def test_two_pieces_are_a_text_template_in_both_modes(text: str) -> None:
    scope = {"a": 1, "b": 0}
    for mode in ("guard", "template"):
        compiled = compile_expression(text, mode=mode)  # type: ignore[arg-type]
        assert compiled.text_template and compiled.fast
        assert _eval(text, scope, mode) == JINJA.from_string(text).render(**scope)


@pytest.mark.parametrize(
    ("text", "value"),
    [("{{ '}}' }}", "}}"), ("  {{- x -}}  ", 5), ("{{ x }}\n", 5), ("{{ [x, '{{'] }}", [5, "{{"])],
)
def test_one_expression_is_native_whatever_its_braces_and_blanks(text: str, value: Any) -> None:
    compiled = compile_expression(text)
    assert not compiled.text_template
    assert _eval(text, {"x": 5}) == value


def test_normalized_text_ignores_braces_of_a_guard() -> None:
    a = compile_expression("{{  x > 1 }}", mode="guard")
    b = compile_expression("x > 1", mode="guard")
    assert a.normalized == b.normalized == "x > 1"


def test_data_is_never_rerendered() -> None:
    assert _eval("{{ payload }}", {"payload": "{{ secret }}"}) == "{{ secret }}"
    assert _eval("a {{ payload }}", {"payload": "{{ secret }}"}) == "a {{ secret }}"


# ---------------------------------------------------------------- references


STORE = {"k1": {"rows": [{"id": 7}], "count": 1}}


def _resolver(body: dict[str, Any]) -> Any:
    return STORE[body["key"]]


REF = {"$ref": {"store": "db", "key": "k1", "size": 10, "checksum": "x"}}


@pytest.mark.parametrize(
    ("expr", "value"),
    [
        ("{{ fetch.rows[0].id }}", 7),
        ("{{ fetch['count'] + 1 }}", 2),
        ("{{ outcome.result.rows | length }}", 1),
        ("{{ fetch.rows | batch(1) | list | length }}", 1),  # slow path
        ("n={{ fetch.count }}", "n=1"),
    ],
)
def test_reading_into_a_reference_resolves_it(expr: str, value: Any) -> None:
    scope = {"fetch": REF, "outcome": {"result": REF}, RESOLVER_KEY: _resolver}
    assert _eval(expr, scope) == value


def test_a_reference_passes_through_and_stays_unresolved_without_resolver() -> None:
    assert _eval("{{ fetch }}", {"fetch": REF, RESOLVER_KEY: _resolver}) == REF
    assert isinstance(_eval("{{ fetch.rows }}", {"fetch": REF}), Undefined)
    assert isinstance(slow_expression("fetch.rows")({"fetch": REF}), Undefined)


def test_the_resolver_is_not_reachable_from_an_expression() -> None:
    with pytest.raises(ExpressionSyntaxError):
        compile_expression("{{ $resolve }}")
    assert _flatten({RESOLVER_KEY: _resolver, "x": 1}) == {"x": 1}  # what jinja2 sees


# ---------------------------------------------------------------- errors and refusals


def test_runtime_errors_name_the_expression_and_where_it_was_written() -> None:
    entry = compile_expression("{{ ctx.count + 1 }}").to_entry()
    entry["where"] = "play.yaml:12:17"
    with pytest.raises(ExpressionError) as info:
        compile_entry(entry)({"ctx": {}})
    error = info.value
    assert error.where == "play.yaml:12:17" and error.error_type == "UndefinedError"
    assert str(error).startswith("play.yaml:12:17: UndefinedError")
    assert "`{{ ctx.count + 1 }}`" in str(error)


def test_slow_path_errors_are_wrapped_too() -> None:
    entry = compile_expression("{{ x.split(',') | batch(0) | list }}").to_entry()
    assert entry["kind"] == "jinja_expression"
    with pytest.raises(ExpressionError):
        compile_entry(entry)({"x": 1})


@pytest.mark.parametrize("expr", ["'{0.__class__}'.format(x)", "x.format_map(y)"])
def test_string_formatting_is_refused_statically(expr: str) -> None:
    with pytest.raises(ExpressionUnsafe):
        compile_expression("{{ " + expr + " }}")


@pytest.mark.parametrize(
    "expr",
    ["s.format('{0.__class__}')", "s.format_map(d)", "d['_private']", "d._private"],
)
def test_slow_path_refuses_formatting_and_underscore_keys(expr: str) -> None:
    with pytest.raises(SecurityError):
        slow_expression(expr)({"s": "{0}", "d": {"_private": 1}})


def test_fast_path_refuses_a_format_method_value() -> None:
    with pytest.raises(ExpressionError) as info:
        _eval("{{ s.format }}", {"s": "x"})
    assert isinstance(info.value.cause, SecurityError)


def test_slow_path_has_only_the_whitelisted_globals() -> None:
    for name in ("cycler", "joiner", "lipsum"):
        assert isinstance(slow_expression(name)({}), Undefined)
    assert slow_expression("lookup(d, 'a.b')")({"d": {"a": {"b": 3}}}) == 3
    assert list(slow_expression("range(3)")({})) == [0, 1, 2]


def test_slow_path_reads_a_mapping_key_before_a_method() -> None:
    assert slow_expression("data.items | batch(5) | list")({"data": {"items": [1]}}) == [[1]]


# ---------------------------------------------------------------- the pass

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
workload: {api_url: "http://x", items: [1, 2]}
workflow:
  - step: start
    loop: {in: "{{ workload.items }}", iterator: item}
    tool:
      - name: fetch
        kind: http
        url: "{{ api_url }}/{{ item }}"
        spec:
          policy:
            rules:
              - when: "{{ outcome.status == 'error' }}"
                then: {do: retry, attempts: 2, set_ctx: {failures: "{{ failures | default(0) + 1 }}"}}
    next:
      arcs:
        - step: done
          when: "{{ event.name == 'loop.done' and ctx.failures is not defined }}"
          args: {n: "{{ start | length }}"}
  - step: done
    tool: {kind: noop, message: "{{ n }} items, first {{ fetch.id }}"}
"""


def _pool(source: str) -> tuple[ExpressionPool, list[str]]:
    unit = compile_source(source, "p.yaml", until="expressions")
    pool = unit.pool
    assert isinstance(pool, ExpressionPool)
    return pool, [d.code for d in unit.reporter.diagnostics]


def test_pass_records_every_expression_under_its_tree_path() -> None:
    pool, codes = _pool(PLAYBOOK)
    assert codes == []
    paths = set(pool.by_path)
    assert ("workflow", "start", "loop") in paths
    assert ("workflow", "start", "tasks", "fetch", "args", "url") in paths
    assert ("workflow", "start", "tasks", "fetch", "rules", 0, "when") in paths
    assert ("workflow", "start", "tasks", "fetch", "rules", 0, "set_ctx", "failures") in paths
    assert ("workflow", "start", "next", 0, "when") in paths
    assert ("workflow", "start", "next", 0, "args", "n") in paths
    assert ("workflow", "done", "tasks", "done_task", "args", "message") in paths
    guard = pool.entries[pool.by_path[("workflow", "start", "next", 0, "when")]]
    assert guard.event_names == ("loop.done",) and guard.mentions_event
    assert all(entry.fast for entry in pool.entries)


def test_pool_entries_carry_the_first_position() -> None:
    pool, _ = _pool(PLAYBOOK)
    where = [entry.get("where") for entry in pool.to_data()]
    assert where[0] == "p.yaml:6:16"


def test_pool_data_is_identical_across_compilations() -> None:
    assert _pool(PLAYBOOK)[0].to_data() == _pool(PLAYBOOK)[0].to_data()


def test_undefined_names_are_warned_once_per_use_with_a_suggestion() -> None:
    unit = compile_source(
        PLAYBOOK.replace("{{ api_url }}", "{{ api_ulr }}"), "p.yaml", until="expressions"
    )
    found = [d for d in unit.reporter.diagnostics if d.code == "NOE305"]
    assert len(found) == 1 and "`api_ulr`" in found[0].message
    assert found[0].hint == "did you mean `api_url`?"
    assert found[0].span is not None and found[0].span.line == 10


def test_no_corpus_playbook_has_a_slow_path_expression() -> None:
    """The conformance cases and, when present, the NoETL corpus."""
    slow = []
    for path in CONFORMANCE_CASES + NOETL_FILES:
        unit = compile_source(path.read_text(encoding="utf-8"), str(path), until="expressions")
        slow += [str(d) for d in unit.reporter.diagnostics if d.code in ("NOE301", "NOE303")]
        pool = unit.pool
        if isinstance(pool, ExpressionPool):
            slow += [e.source for e in pool.entries if not e.fast]
    assert slow == []
