"""Where NoETL's meaning of a construct differs from a first reading, noetlc follows NoETL's
engine: each test runs a small playbook embedded and checks the outcome NoETL gives it."""

from __future__ import annotations

from typing import Any

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded

HEAD = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: semantics, path: tests/semantics}
workflow:
"""


def _run(body: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    unit = compile_source(HEAD + body, "semantics.yaml")
    errors = [d for d in unit.reporter.diagnostics if d.is_error]
    assert not errors, errors
    assert unit.payload is not None
    return run_embedded(unit.payload, overrides)


def test_a_next_list_without_conditions_is_a_parallel_fork() -> None:
    summary = _run(
        """  - step: start
    tool: {kind: noop}
    next: [{step: a}, {step: b}]
  - step: a
    tool: {kind: python, code: "result = 'a'"}
  - step: b
    tool: {kind: python, code: "result = 'b'"}
"""
    )
    assert summary["status"] == "completed", summary
    assert summary["steps"]["a"]["status"] == "done"
    assert summary["steps"]["b"]["status"] == "done"


def test_a_next_list_with_conditions_keeps_first_match() -> None:
    summary = _run(
        """  - step: start
    tool: {kind: noop}
    next: [{step: a, when: "{{ workload.go }}"}, {step: b}]
  - step: a
    tool: {kind: python, code: "result = 'a'"}
  - step: b
    tool: {kind: python, code: "result = 'b'"}
""",
        {"go": True},
    )
    assert summary["steps"]["a"]["status"] == "done"
    assert summary["steps"].get("b", {}).get("status") != "done"


def test_call_done_fires_after_a_failed_call_so_a_retry_rule_retries() -> None:
    summary = _run(
        """  - step: start
    tool:
      kind: python
      input: {attempt: "{{ _attempt }}"}
      code: |
        def main(attempt):
            if attempt < 3:
                raise ConnectionError("busy")
            return {"attempt": attempt}
    case:
      - when: "{{ event.name == 'call.done' and error }}"
        then:
          - retry: {max_attempts: 5, delay: 0.01}
"""
    )
    assert summary["status"] == "completed", summary
    assert summary["result"] == {"attempt": 3}


def test_step_enter_runs_once_per_step_run_before_its_loop() -> None:
    summary = _run(
        """  - step: start
    loop: {in: [1, 2, 3], iterator: i}
    tool: {kind: python, input: {i: "{{ i }}"}, code: "result = i * 10"}
    case:
      - when: "{{ event.name == 'step.enter' }}"
        then:
          - set: {ctx.seen: []}
      - when: "{{ event.name == 'call.done' }}"
        then:
          - collect: {from: "{{ result }}", into: seen, mode: append}
    next: [{step: done}]
  - step: done
    tool: {kind: python, input: {s: "{{ ctx.seen }}"}, code: "result = s"}
"""
    )
    assert summary["status"] == "completed", summary
    assert summary["result"] == [10, 20, 30]  # the accumulator was not reset per iteration


SKIP = """  - step: start
    tool: {kind: noop}
    next: [{step: maybe}]
  - step: maybe
    tool: {kind: python, code: "result = 'ran'"}
    case:
      - when: "{{ event.name == 'step.enter' and workload.off }}"
        then:
          - skip: true
"""


def test_skip_records_the_step_as_skipped() -> None:
    skipped = _run(SKIP, {"off": True})
    assert skipped["status"] == "completed", skipped
    assert skipped["steps"]["maybe"]["status"] == "skipped"
    ran = _run(SKIP, {"off": False})
    assert ran["steps"]["maybe"] == {"runs": 1, "status": "done", "result": "ran"}


def test_skip_after_the_call_is_refused() -> None:
    text = HEAD + SKIP.replace("step.enter", "call.done")
    unit = compile_source(text, "semantics.yaml")
    errors = [(d.code, d.span.line) for d in unit.reporter.diagnostics if d.is_error]
    assert errors == [("NOE410", 13)]
