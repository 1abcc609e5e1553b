"""Constructs of the NoETL specs that used to be accepted and ignored: each now runs with its
meaning (shown by running it embedded) or is refused at its key (the NOE106/NOE306 rows of
tests/diagnostics show the located errors).
"""

from __future__ import annotations

from typing import Any

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded

HEAD = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: constructs, path: tests/constructs}
workflow:
"""

FLAKY = """kind: python
                input: {attempt: "{{ _attempt }}"}
                code: |
                  def main(attempt):
                      if attempt < 3:
                          raise ConnectionError("busy")
                      return {"attempt": attempt}"""


def _run(body: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    unit = compile_source(HEAD + body, "constructs.yaml")
    errors = [d for d in unit.reporter.diagnostics if d.is_error]
    assert not errors, errors
    assert unit.payload is not None
    summary = run_embedded(unit.payload, overrides)
    assert summary["status"] == "completed", summary
    return summary


def _errors(body: str) -> list[tuple[str, int]]:
    unit = compile_source(HEAD + body, "constructs.yaml")
    return [(d.code, d.span.line) for d in unit.reporter.diagnostics if d.is_error]


def test_next_to_list_in_a_case_rule_starts_every_target() -> None:
    summary = _run(
        """  - step: start
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          - next:
              to: [{step: a}, {step: b}]
              policy: end_step
  - step: a
    tool: {kind: python, code: "result = 'a'"}
  - step: b
    tool: {kind: python, code: "result = 'b'"}
"""
    )
    assert summary["steps"]["a"]["status"] == "done"
    assert summary["steps"]["b"]["status"] == "done"


def test_next_priority_and_delay_are_refused_not_dropped() -> None:
    body = """  - step: start
    tool: {kind: python, code: "result = 1"}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          - next:
              to: [{step: done}]
              priority: 10
              spec: {delay: 5s}
  - step: done
    tool: {kind: noop}
"""
    assert _errors(body) == [("NOE106", 12), ("NOE106", 13)]


def test_a_standalone_else_rule_routes_when_no_earlier_rule_matched() -> None:
    body = """  - step: start
    tool: {kind: python, input: {v: "{{ workload.v }}"}, code: "result = v"}
    case:
      - when: "{{ event.name == 'call.done' and result == 5 }}"
        then:
          - next: [{step: five}]
      - else:
          - next: [{step: other}]
  - step: five
    tool: {kind: python, code: "result = 'five'"}
  - step: other
    tool: {kind: python, code: "result = 'other'"}
"""
    assert _run(body, {"v": 5})["result"] == "five"
    assert _run(body, {"v": 7})["result"] == "other"


def test_retry_on_a_task_inside_then_retries_it() -> None:
    summary = _run(
        f"""  - step: start
    tool: {{kind: noop}}
    case:
      - when: "{{{{ event.name == 'call.done' }}}}"
        then:
          - flaky:
              tool:
                {FLAKY}
              retry: {{max_attempts: 5, delay: 0.01}}
          - next: [{{step: done}}]
  - step: done
    tool: {{kind: python, input: {{r: "{{{{ start }}}}"}}, code: "result = r"}}
"""
    )
    assert summary["steps"]["start"]["status"] == "done"


def test_the_backoff_object_gives_delay_max_delay_and_jitter() -> None:
    body = """  - step: start
    tool:
      - flaky:
          kind: python
          input: {attempt: "{{ _attempt }}"}
          code: |
            def main(attempt):
                if attempt < 3:
                    raise ConnectionError("busy")
                return {"attempt": attempt}
          retry:
            max_attempts: 4
            backoff: {type: exponential, delay_seconds: 0.01, max_delay_seconds: 0.02, jitter: true}
"""
    unit = compile_source(HEAD + body, "constructs.yaml", until="normalize")
    assert unit.playbook is not None
    (task,) = unit.playbook.workflow[0].tasks
    (rule,) = task.policy.rules if task.policy else ()
    action = rule.action
    assert (action.do, action.delay, action.max_delay, action.backoff) == (
        "retry",
        0.01,
        0.02,
        "exponential",
    )
    assert action.jitter > 0
    assert _run(body)["result"] == {"attempt": 3}


def test_tool_spec_retry_is_the_tasks_retry() -> None:
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
      spec: {retry: 5}
"""
    )
    assert summary["result"] == {"attempt": 3}


def test_loop_batch_size_and_on_error_continue() -> None:
    body = """  - step: start
    loop:
      in: [1, 2, 3]
      iterator: i
      spec: {mode: parallel, batch_size: 2, on_error: continue}
    tool:
      kind: python
      input: {i: "{{ i }}"}
      code: |
        def main(i):
            if i == 2:
                raise ValueError("two")
            return i * 10
"""
    unit = compile_source(HEAD + body, "constructs.yaml", until="normalize")
    assert unit.playbook is not None
    loop = unit.playbook.workflow[0].loop
    assert loop is not None and (loop.max_in_flight, loop.failure_mode) == (2, "best_effort")
    assert _run(body)["result"] == {
        "results": [10, None, 30],
        "stats": {"total": 3, "success": 2, "failed": 1},
    }


def test_a_literal_loop_list_runs_its_items() -> None:
    summary = _run(
        """  - step: start
    loop: {in: [1, "{{ workload.two }}", 3], iterator: i}
    tool: {kind: python, input: {i: "{{ i }}"}, code: "result = i * 2"}
""",
        {"two": 2},
    )
    assert summary["result"]["results"] == [2, 4, 6]


def test_step_args_are_the_tools_input() -> None:
    summary = _run(
        """  - step: start
    args: {a: 5, b: 1}
    input: {b: 2}
    tool: {kind: python, code: "result = a * 10 + b"}
"""
    )
    assert summary["result"] == 52


def test_set_with_a_ctx_mapping_writes_ctx_keys() -> None:
    summary = _run(
        """  - step: start
    tool:
      kind: python
      code: "result = 1"
      spec:
        policy:
          rules:
            - else:
                then: {do: continue, set: {ctx: {y: 2}}}
    next: done
  - step: done
    tool: {kind: python, input: {y: "{{ ctx.y }}"}, code: "result = y"}
"""
    )
    assert summary["ctx"] == {"y": 2} and summary["result"] == 2


def test_duration_strings_are_seconds() -> None:
    body = """  - step: start
    spec: {timeout: "1m30s"}
    tool:
      kind: python
      code: "result = 1"
      spec: {timeout: "250ms", isolation: subprocess}
"""
    unit = compile_source(HEAD + body, "constructs.yaml", until="normalize")
    assert unit.playbook is not None
    (task,) = unit.playbook.workflow[0].tasks
    assert task.spec is not None and task.spec.get("timeout").value == 0.25  # type: ignore[union-attr]
    assert _errors(body.replace('"1m30s"', '"soon"')) == [("NOE104", 6)]


def test_a_subprocess_task_is_stopped_at_its_duration_timeout() -> None:
    unit = compile_source(
        HEAD
        + """  - step: start
    tool:
      kind: python
      code: "import time\\ntime.sleep(30)\\nresult = 1"
      spec: {timeout: "500ms", isolation: subprocess}
""",
        "constructs.yaml",
    )
    assert unit.payload is not None
    summary = run_embedded(unit.payload)
    assert summary["status"] == "failed"
    assert summary["error"]["type"] == "Timeout", summary["error"]


def test_spec_eval_mode_is_the_steps_eval_mode() -> None:
    body = """  - step: start
    spec: {eval_mode: on_event, timeout: "2s"}
    tool: {kind: noop}
"""
    unit = compile_source(HEAD + body, "constructs.yaml", until="normalize")
    assert unit.playbook is not None
    listener = unit.playbook.workflow[0].listener
    assert listener is not None and listener.timeout == 2.0
