"""The legacy forms only `noetlc migrate` rewrites: task `eval:`, root `vars:`, `pipe:` in a
`case` rule, `next` entries with `when`/`then`, steps without a tool.

For each: `check` rejects the form in a file with a located error whose hint names `migrate`;
`migrate` rewrites it (reporting the rewrite), the result checks clean and runs with the
meaning the older engine gave it.
"""

from __future__ import annotations

from typing import Any

from noetlc.cli.noetlc_commands.migrate import migrate_text
from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded

HEAD = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: legacy, path: tests/legacy}
"""


def _migrate(text: str) -> tuple[str, list[str]]:
    unit = compile_source(text, "legacy.yaml", until="desugar", options={"migrate": True})
    errors = [d for d in unit.reporter.diagnostics if d.is_error]
    assert not errors, errors
    assert unit.document is not None and unit.canonical is not None
    codes = [d.code for d in unit.reporter.diagnostics]
    return migrate_text(text, unit.document, unit.canonical), codes


def _check_rejects(text: str, code: str, line: int) -> None:
    unit = compile_source(text, "legacy.yaml")
    errors = [d for d in unit.reporter.diagnostics if d.is_error]
    assert [(d.code, d.span.line) for d in errors][:1] == [(code, line)], errors
    assert errors[0].hint is not None and "noetlc migrate" in errors[0].hint


def _run(text: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    unit = compile_source(text, "migrated.yaml")
    errors = [d for d in unit.reporter.diagnostics if d.is_error]
    assert not errors, (errors, text)
    assert not [d for d in unit.reporter.diagnostics if d.code.startswith("NOE4")], text
    assert unit.payload is not None
    return run_embedded(unit.payload, overrides)


EVAL = (
    HEAD
    + """workflow:
  - step: start
    tool:
      - flaky:
          kind: python
          input: {attempt: "{{ _attempt }}"}
          code: |
            def main(attempt):
                if attempt < 3:
                    raise ConnectionError("busy")
                return {"attempt": attempt}
          eval:
            - expr: "{{ outcome.status == 'error' }}"
              do: retry
              attempts: 5
              delay: 0.01
            - else:
                do: continue
                set_vars: {seen: "{{ outcome.result.attempt }}"}
    next:
      - step: done
  - step: done
    tool: {kind: python, input: {a: "{{ vars.seen }}"}, code: "result = {'seen': a}"}
"""
)


def test_eval_is_rejected_by_check_with_the_migrate_hint() -> None:
    _check_rejects(EVAL, "NOE105", 15)


def test_eval_becomes_policy_rules_and_runs() -> None:
    text, codes = _migrate(EVAL)
    assert "NOE413" in codes
    assert "eval:" not in text and "policy:" in text and "set_ctx:" in text
    assert "ctx.seen" in text
    summary = _run(text)
    assert summary["status"] == "completed", summary
    assert summary["result"] == {"seen": 3}


ROOT_VARS = (
    HEAD
    + """vars:
  page: 1
  pages: []
workflow:
  - step: start
    tool:
      kind: python
      input: {page: "{{ vars.page }}", pages: "{{ vars.pages }}"}
      code: |
        result = {"page": page + 1, "pages": pages + [page]}
    vars:
      page: "{{ result.page }}"
      pages: "{{ result.pages }}"
    next:
      - step: start
        when: "{{ vars.page <= 3 }}"
      - step: done
  - step: done
    tool: {kind: python, input: {p: "{{ vars.pages }}"}, code: "result = p"}
"""
)


def test_root_vars_are_rejected_by_check_with_the_migrate_hint() -> None:
    _check_rejects(ROOT_VARS, "NOE105", 4)


def test_root_vars_become_ctx_set_once_at_the_start() -> None:
    text, codes = _migrate(ROOT_VARS)
    assert "NOE414" in codes
    assert "start__vars" in text and "vars." not in text
    summary = _run(text)
    assert summary["status"] == "completed", summary
    # the entry step runs three times: its initial values are set once, not reset
    assert summary["result"] == [1, 2, 3]


NEXT_THEN = (
    HEAD
    + """workload: {action: b}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      - when: "{{ workload.action == 'a' }}"
        then:
          - step: a
        args: {via: a}
      - when: "{{ workload.action == 'b' }}"
        then:
          - step: b
        args: {via: b}
      - else:
          - step: other
  - step: a
    tool: {kind: python, input: {via: "{{ via }}"}, code: "result = 'a:' + via"}
  - step: b
    tool: {kind: python, input: {via: "{{ via }}"}, code: "result = 'b:' + via"}
  - step: other
    tool: {kind: python, code: "result = 'other'"}
"""
)


def test_next_entries_with_then_are_rejected_by_check() -> None:
    _check_rejects(NEXT_THEN, "NOE105", 10)


def test_next_entries_with_then_become_first_match_arcs() -> None:
    text, codes = _migrate(NEXT_THEN)
    assert "NOE416" in codes
    assert _run(text)["result"] == "b:b"
    assert _run(text, {"action": "a"})["result"] == "a:a"
    assert _run(text, {"action": "z"})["result"] == "other"


ROUTING_ONLY = (
    HEAD
    + """workflow:
  - step: start
    tool: {kind: python, code: "result = 2"}
    next: [{step: decide}]
  - step: decide
    next:
      - step: end
        when: "{{ start == 2 }}"
      - step: wrong
  - step: wrong
    tool: {kind: python, code: "result = 'wrong'"}
  - step: end
    tool: {kind: python, input: {v: "{{ start }}"}, code: "result = v * 10"}
"""
)


def test_a_step_without_a_tool_is_rejected_by_check() -> None:
    _check_rejects(ROUTING_ONLY, "NOE206", 8)


def test_a_step_without_a_tool_becomes_a_noop_step() -> None:
    text, codes = _migrate(ROUTING_ONLY)
    assert "NOE409" in codes
    assert _run(text)["result"] == 20


PIPE = (
    HEAD
    + """workflow:
  - step: start
    tool: {kind: noop}
    case:
      - when: "{{ event.name == 'call.done' }}"
        then:
          - pipe:
              - first:
                  tool:
                    kind: python
                    input: {attempt: "{{ _attempt }}"}
                    code: |
                      def main(attempt):
                          if attempt < 2:
                              raise ConnectionError("busy")
                          return {"n": 20}
              - second:
                  tool:
                    kind: python
                    input: {prev: "{{ _prev }}"}
                    code: "result = {'n': prev['n'] + 1}"
            catch:
              cond:
                - when: "{{ _task == 'first' }}"
                  do: retry
                  attempts: 3
                - else:
                    do: fail
            finally:
              - next:
                  - step: done
  - step: done
    tool: {kind: python, input: {r: "{{ start }}"}, code: "result = r"}
"""
)


def test_pipe_is_rejected_by_check_with_the_migrate_hint() -> None:
    _check_rejects(PIPE, "NOE105", 10)


def test_pipe_becomes_the_rules_tasks_with_catch_as_policy_rules() -> None:
    text, codes = _migrate(PIPE)
    assert "NOE415" in codes and "pipe:" not in text
    summary = _run(text)
    assert summary["status"] == "completed", summary
    assert summary["result"] == {"n": 21}


def test_set_prev_in_a_catch_rule_is_refused_with_a_location() -> None:
    text = PIPE.replace(
        "                    do: fail",
        "                    do: skip\n                    set_prev: {n: 0}",
    )
    unit = compile_source(text, "legacy.yaml", until="desugar", options={"migrate": True})
    errors = [(d.code, d.span.line) for d in unit.reporter.diagnostics if d.is_error]
    assert errors == [("NOE410", 32)]


def test_an_else_after_conditions_written_as_text_negates_their_rendered_text() -> None:
    # `"{{ workload.action }} == push"` is text around a template: it reads as the rendered
    # text (never empty, so true); the else rule after it negates exactly that
    text, _ = _migrate(
        HEAD
        + """workflow:
  - step: start
    tool: {kind: noop}
    case:
      - when: "{{ workload.action }} == push"
        then:
          - step: push
      - else:
          - step: help
  - step: push
    tool: {kind: python, code: "result = 'push'"}
  - step: help
    tool: {kind: python, code: "result = 'help'"}
"""
    )
    unit = compile_source(text, "migrated.yaml")
    assert not [d for d in unit.reporter.diagnostics if d.is_error]
    assert unit.payload is not None
    assert run_embedded(unit.payload, {"action": "pull"})["result"] == "push"


def test_tasks_after_a_failed_call_run_then_the_failure_routes(tmp_path: Any) -> None:
    marker = tmp_path / "notified"
    text = (
        HEAD
        + f"""workflow:
  - step: start
    tool: {{kind: python, code: "raise ValueError('boom')"}}
    case:
      - when: "{{{{ event.name == 'call.error' }}}}"
        then:
          - notify:
              tool:
                kind: python
                input: {{path: "{marker}"}}
                code: |
                  def main(path):
                      open(path, "w").write("yes")
                      return "notified"
          - next: [{{step: handled}}]
  - step: handled
    tool: {{kind: python, code: "result = 'handled'"}}
"""
    )
    migrated, _ = _migrate(text)
    summary = _run(migrated)
    assert summary["status"] == "completed", summary
    assert summary["steps"]["start"]["status"] == "failed"
    assert summary["result"] == "handled"
    assert marker.read_text() == "yes"


def test_a_retry_with_args_params_re_invokes_the_call_after_its_tasks() -> None:
    text = (
        HEAD
        + """workflow:
  - step: start
    tool:
      kind: python
      input: {page: "{{ iter.params.page | default(1) }}"}
      code: |
        def main(page):
            return {"page": page, "more": page < 3}
    case:
      - when: "{{ event.name == 'call.done' and response.more }}"
        then:
          - save_page:
              tool: {kind: python, input: {p: "{{ response.page }}"}, code: "result = p"}
          - retry:
              max_attempts: 10
              args:
                params: {page: "{{ response.page + 1 }}"}
      - when: "{{ event.name == 'call.done' }}"
        then:
          - next: [{step: done}]
  - step: done
    tool: {kind: python, input: {r: "{{ start }}"}, code: "result = r"}
"""
    )
    migrated, _ = _migrate(text)
    summary = _run(migrated)
    assert summary["status"] == "completed", summary
    assert summary["result"] == {"page": 3, "more": False}


def test_a_log_action_is_a_noop_task_recording_the_message() -> None:
    text = (
        HEAD
        + """workflow:
  - step: start
    tool: {kind: python, code: "result = 7"}
    case:
      - when: "{{ event.name == 'call.done' and result > 5 }}"
        then:
          - log: "big result {{ result }}"
"""
    )
    migrated, _ = _migrate(text)
    assert "start__log" in migrated and "kind: noop" in migrated
    summary = _run(migrated)
    assert summary["status"] == "completed", summary
    assert summary["result"] == 7


TRACING = (
    HEAD
    + """tracing:
  enabled: true
workflow:
  - step: start
    loop: {in: [1, 2, 3], iterator: i, mode: async, concurrency: 2}
    tool: {kind: python, input: {i: "{{ i }}"}, code: "result = i"}
"""
)


def test_root_tracing_is_refused_by_check_and_removed_by_migrate() -> None:
    unit = compile_source(TRACING, "legacy.yaml")
    assert [(d.code, d.span.line) for d in unit.reporter.diagnostics if d.is_error] == [
        ("NOE106", 4)
    ]
    text, codes = _migrate(TRACING)
    assert "NOE417" in codes and "tracing" not in text
    # the loop's legacy `concurrency` is its `max_in_flight`
    assert "max_in_flight: 2" in text
    assert _run(text)["result"]["results"] == [1, 2, 3]


TOOL_KIND = (
    HEAD
    + """workflow:
  - step: start
    desc: an older form
    tool: python
    input: {v: 4}
    code: "result = v * 2"
"""
)


def test_tool_as_a_kind_name_becomes_a_task_mapping() -> None:
    _check_rejects(TOOL_KIND, "NOE105", 7)
    text, codes = _migrate(TOOL_KIND)
    assert "NOE418" in codes
    assert _run(text)["result"] == 8


def test_set_prev_replaces_a_failed_tasks_result_for_the_next_task() -> None:
    text = PIPE.replace(
        """                - when: "{{ _task == 'first' }}"
                  do: retry
                  attempts: 3""",
        """                - when: "{{ _task == 'first' and _err }}"
                  do: skip
                  set_prev: {n: 5}""",
    ).replace("if attempt < 2:", "if attempt < 9:")
    migrated, _ = _migrate(text)
    assert "first__prev_0" in migrated
    summary = _run(migrated)
    assert summary["status"] == "completed", summary
    assert summary["result"] == {"n": 6}


def test_tool_as_a_kind_name_takes_the_steps_command_as_its_argument() -> None:
    text, codes = _migrate(
        HEAD
        + """workflow:
  - step: start
    tool: shell
    command: "echo hi"
"""
    )
    assert "NOE418" in codes
    summary = _run(text)
    assert summary["status"] == "completed", summary
    assert summary["result"]["stdout"] == "hi\n"
