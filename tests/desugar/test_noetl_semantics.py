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


def _writes_loop(mode: str, write: str) -> str:
    return f"""  - step: start
    loop:
      in: [1, 2, 3]
      iterator: i
      spec: {{mode: {mode}, max_in_flight: 3}}
    tool:
      kind: python
      input: {{i: "{{{{ i }}}}"}}
      code: "result = i"
      spec:
        policy:
          rules:
            - else:
                then: {{do: continue, set_ctx: {write}}}
"""


def test_parallel_iterations_writing_different_values_to_one_ctx_key_fail_the_step() -> None:
    summary = _run(_writes_loop("parallel", '{last: "{{ i }}"}'))
    assert summary["status"] == "failed", summary
    assert summary["error"]["type"] == "ConflictingCtxWrites", summary["error"]


def test_ctx_writes_that_do_not_race_are_fine() -> None:
    sequential = _run(_writes_loop("sequential", '{last: "{{ i }}"}'))
    assert sequential["status"] == "completed" and sequential["ctx"] == {"last": 3}
    same = _run(_writes_loop("parallel", "{seen: true}"))
    assert same["status"] == "completed" and same["ctx"] == {"seen": True}


def test_the_first_next_reached_wins_whatever_the_next_policy() -> None:
    for policy in ("end_step", "break_chain", "defer"):
        summary = _run(
            f"""  - step: start
    tool: {{kind: noop}}
    spec: {{case_mode: inclusive, next_policy: {policy}}}
    case:
      - when: "{{{{ event.name == 'step.exit' }}}}"
        then: {{next: [{{step: first}}]}}
      - when: "{{{{ event.name == 'step.exit' }}}}"
        then: {{next: [{{step: second}}]}}
  - step: first
    tool: {{kind: python, code: "result = 'first'"}}
  - step: second
    tool: {{kind: python, code: "result = 'second'"}}
"""
        )
        assert summary["status"] == "completed", summary
        assert summary["steps"]["first"]["status"] == "done", policy
        assert "second" not in summary["steps"], policy


LOOP_EXIT = """  - step: start
    loop: {in: [1, 2, 3, 4, 5], iterator: i}
    tool: {kind: python, input: {i: "{{ i }}"}, code: "result = {'v': i}"}
    case:
      - when: "{{ event.name == 'call.done' and response.v == workload.stop_at }}"
        then:
          - next: [{step: found}]
      - when: "{{ event.name == 'loop.done' }}"
        then:
          - next: [{step: none}]
  - step: found
    tool: {kind: python, input: {r: "{{ start }}"}, code: "result = r"}
  - step: none
    tool: {kind: python, input: {r: "{{ start.results }}"}, code: "result = len(r)"}
"""


def test_a_next_from_call_done_ends_the_loop_early() -> None:
    summary = _run(LOOP_EXIT, {"stop_at": 2})
    assert summary["status"] == "completed", summary
    assert summary["result"]["results"] == [{"v": 1}, {"v": 2}]  # iterations 3..5 never ran
    assert "none" not in summary["steps"]
    full = _run(LOOP_EXIT, {"stop_at": 9})
    assert full["result"] == 5 and "found" not in full["steps"]


def test_inclusive_case_mode_runs_every_matching_rules_actions_in_order() -> None:
    summary = _run(
        """  - step: start
    tool: {kind: python, input: {v: "{{ workload.v }}"}, code: "result = {'v': v}"}
    case_mode: inclusive
    case:
      - when: "{{ event.name == 'call.done' and response.v > 1 }}"
        then:
          - set: {ctx.order: "{{ (ctx.order | default([])) + ['big'] }}"}
      - when: "{{ event.name == 'call.done' and response.v > 10 }}"
        then:
          - note:
              tool: {kind: python, input: {v: "{{ response.v }}"}, code: "result = v * 2"}
          - set: {ctx.order: "{{ (ctx.order | default([])) + ['huge'] }}"}
      - when: "{{ event.name == 'call.done' and response.v < 0 }}"
        then:
          - set: {ctx.order: "{{ (ctx.order | default([])) + ['negative'] }}"}
      - when: "{{ event.name == 'step.exit' }}"
        then:
          - next: [{step: done}]
  - step: done
    tool: {kind: python, input: {o: "{{ ctx.order }}", r: "{{ start }}"}, code: "result = [o, r]"}
""",
        {"v": 20},
    )
    assert summary["status"] == "completed", summary
    assert summary["result"] == [["big", "huge"], {"v": 20}]


def test_inclusive_rules_with_results_are_refused() -> None:
    unit = compile_source(
        HEAD
        + """  - step: start
    tool: {kind: python, code: "result = 1"}
    case_mode: inclusive
    case:
      - when: "{{ event.name == 'call.done' }}"
        then: [{result: {from: "ctx.a"}}]
      - when: "{{ event.name == 'call.done' }}"
        then: [{result: {from: "ctx.b"}}]
""",
        "semantics.yaml",
    )
    errors = [(d.code, d.span.line) for d in unit.reporter.diagnostics if d.is_error]
    assert errors == [("NOE106", 7)]


CASE_FORK = """  - step: start
    tool: {kind: python, input: {v: "{{ workload.v }}"}, code: "result = v"}
    case:
      - when: "{{ event.name == 'call.done' and result == 5 }}"
        then:
          - next: [{step: five}]
    next: [{step: a}, {step: b}]
  - step: five
    tool: {kind: noop}
  - step: a
    tool: {kind: python, code: "result = 'a'"}
  - step: b
    tool: {kind: python, code: "result = 'b'"}
"""


def test_a_structural_fork_of_a_case_step_starts_every_target_unless_a_rule_routed() -> None:
    forked = _run(CASE_FORK, {"v": 1})
    assert {s for s, r in forked["steps"].items() if r["status"] == "done"} == {"start", "a", "b"}
    routed = _run(CASE_FORK, {"v": 5})
    assert {s for s, r in routed["steps"].items() if r["status"] == "done"} == {"start", "five"}
