"""NoETL-engine rules of the compatibility note (docs/compatibility.md) that the runtime
carries: a retry delay written as a template is evaluated when the rule retries; a policy
`set:` value whose template fails keeps its text."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import MemoryStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "compat_rules"


def _run(name: str, workload: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    path = FIXTURES / name
    unit = compile_source(path.read_text(encoding="utf-8"), str(path))
    assert not [d for d in unit.reporter.diagnostics if d.severity == "error"], (
        unit.reporter.sorted()
    )
    store = MemoryStore()
    summary = run_embedded(unit.payload, workload, store=store)
    events = store.read(str(summary["execution_id"]))
    return summary, events


def _delays(events: list[dict[str, Any]]) -> list[float]:
    return [e["payload"]["delay"] for e in events if e["name"] == "task.retry"]


def test_a_templated_retry_delay_is_evaluated_not_read_as_zero() -> None:
    summary, events = _run("retry_delay_template.yaml", {"wait": 0.02, "cap": None})
    assert summary["status"] == "failed"
    # exponential from the evaluated 0.02 s: 0.02, 0.04 (a template was 0 s before)
    assert _delays(events) == [0.02, 0.04]


def test_a_templated_max_delay_caps_the_evaluated_delay() -> None:
    summary, events = _run("retry_delay_template.yaml", {"wait": "0.03s", "cap": 0.035})
    assert summary["status"] == "failed"
    assert _delays(events) == [0.03, 0.035]


def test_a_templated_delay_that_is_no_number_fails_the_step_with_its_reason() -> None:
    summary, events = _run("retry_delay_template.yaml", {"wait": "soon", "cap": None})
    assert summary["status"] == "failed"
    assert _delays(events) == []
    assert "retry `delay` evaluated to 'soon'" in str(summary["error"])


def test_noetls_private_loop_names_read_the_iterations_index_first_and_last() -> None:
    summary, _ = _run("loop_private_names.yaml", {})
    assert summary["status"] == "completed", summary["error"]
    results = summary["steps"]["over_workload"]["result"]["results"]
    assert [(r["name"], r["index"], r["first"], r["last"]) for r in results] == [
        ("Oslo", 0, True, False),
        ("Lima", 1, False, False),
        ("Pune", 2, False, True),
    ]
    assert "".join(r["label"] for r in results) == "Oslo,Lima,Pune"
    literal = summary["steps"]["over_literal"]["result"]["results"]
    assert [(r["first"], r["last"]) for r in literal] == [(True, False), (False, True)]


def test_iter_last_over_a_list_iterations_may_change_is_refused_with_a_hint() -> None:
    path = FIXTURES / "loop_last_unknown.yaml"
    unit = compile_source(path.read_text(encoding="utf-8"), str(path))
    errors = [d for d in unit.reporter.diagnostics if d.severity == "error"]
    assert [(d.code, d.span.line if d.span else None) for d in errors] == [("NOE302", 15)]
    assert "iter.index == (<the loop's list> | length) - 1" in (errors[0].hint or "")


def test_a_policy_set_whose_template_fails_keeps_its_text_as_noetl_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="noetlc.vm.pipeline"):
        summary, _ = _run("set_keeps_failed_template.yaml", {})
    assert summary["status"] == "completed", summary["error"]
    # the failed value keeps its template text; the other write of the rule is evaluated
    assert summary["steps"]["start"]["result"] == {
        "has_more": "{{ output.data.nothing.page < 3 }}",
        "count": 2,
    }
    assert summary["ctx"] == {"broken": "{{ output.data.nothing.page + 1 }}", "seen": 1}
    assert any("`set: has_more` could not be evaluated" in r.getMessage() for r in caplog.records)
