"""The `resolve` pass: names of steps, tasks, jump targets, tool kinds and workbook tasks."""

from __future__ import annotations

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.diagnostics.report import Diagnostic

HEAD = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t}\n"


def _resolve(body: str) -> list[Diagnostic]:
    unit = compile_source(HEAD + body, "t.yaml", until="resolve")
    return [d for d in unit.reporter.sorted() if d.code.startswith("NOE2")]


def _at(d: Diagnostic) -> tuple[str, int, int]:
    assert d.span is not None
    return d.code, d.span.line, d.span.column


def test_duplicate_steps_show_both_names() -> None:
    [d] = _resolve(
        "workflow:\n  - step: start\n    tool: {kind: noop}\n  - step: start\n    tool: {kind: noop}\n"
    )
    assert _at(d) == ("NOE201", 7, 11)
    [(_, first)] = d.related
    assert (first.line, first.column) == (5, 11)


def test_unknown_targets_get_a_suggestion() -> None:
    [d] = _resolve(
        "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: [{step: ned}]\n"
        "  - step: end\n    tool: {kind: noop}\n"
    )
    assert _at(d) == ("NOE202", 7, 19)
    assert d.hint == "did you mean `end`?"


def test_declared_entry_and_final_steps_must_exist() -> None:
    diags = _resolve(
        "executor: {spec: {entry_step: begin, final_step: fin}}\n"
        "workflow:\n  - step: begn\n    tool: {kind: noop}\n"
    )
    assert [d.code for d in diags] == ["NOE202", "NOE202"]
    assert {d.hint for d in diags} == {"did you mean `begn`?", None}


def test_jump_targets_stay_inside_their_pipeline() -> None:
    diags = _resolve(
        """\
workflow:
  - step: start
    tool:
      - name: a
        kind: noop
        spec: {policy: {rules: [{when: x, then: {do: jump, to: b}}, {else: {then: {do: jump}}}]}}
    next: other
  - step: other
    tool: [{name: b, kind: noop}]
"""
    )
    assert [_at(d) for d in diags] == [("NOE203", 9, 64), ("NOE203", 9, 83)]
    assert "not a task of step `start`" in diags[0].message
    assert "needs `to:`" in diags[1].message


def test_tool_kinds_are_known() -> None:
    [d] = _resolve("workflow:\n  - step: start\n    tool: {kind: pyhton, code: x}\n")
    assert _at(d) == ("NOE205", 6, 18) and d.hint == "did you mean `python`?"


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("{kind: workbook, name: wb}", []),
        ("{kind: workbook, task: wb}", []),
        ("{kind: workbook, name: wbb}", ["NOE207"]),
        ("{kind: workbook}", ["NOE207"]),
    ],
)
def test_workbook_references(call: str, expected: list[str]) -> None:
    diags = _resolve(
        f"workbook:\n  - {{name: wb, kind: noop}}\nworkflow:\n  - step: start\n    tool: {call}\n"
    )
    assert [d.code for d in diags] == expected


@pytest.mark.parametrize("name", ["ctx", "workload", "iter", "outcome", "output", "vars", "_x"])
def test_names_may_not_shadow_template_namespaces(name: str) -> None:
    diags = _resolve(
        f"workflow:\n  - step: start\n    tool: [{{name: {name}, kind: noop}}]\n"
        f"    next: {name}\n  - step: {name}\n    tool: {{kind: noop}}\n"
    )
    assert [d.code for d in diags] == ["NOE208", "NOE208"]


def test_duplicate_task_names() -> None:
    [d] = _resolve(
        "workflow:\n  - step: start\n    tool: [{name: a, kind: noop}, {name: a, kind: noop}]\n"
    )
    assert _at(d) == ("NOE211", 6, 42)
