"""Task chains of legacy rules (case `result`/`sink`/named tasks/`call: {step}`, retry `sink`):
what the rewritten playbooks do when run, and where their diagnostics point."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from noetlc.cli import noetlc_main as cli
from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded

PAGES = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: pages}
workload: {last: 3}
workflow:
  - step: start
    tool:
      kind: python
      args: {p: "{{ iter.params.page if iter.params is defined else 1 }}", last: "{{ workload.last }}"}
      code: |
        result = {"page": p, "items": [p], "more": p < last}
    case:
      - when: "{{ event.name == 'call.done' and response.more }}"
        then:
          - collect: {from: response.items, into: items, mode: extend}
          - call: {params: {page: "{{ response.page + 1 }}"}}
      - when: "{{ event.name == 'call.done' }}"
        then:
          - collect: {from: response.items, into: items, mode: extend}
          - result: {from: ctx.items}
          - next: [{step: report, args: {n: "{{ ctx.items | length }}"}}]
  - step: report
    tool: {kind: noop, input: "{{ args.n }}"}
"""


def _run(source: str, **overrides: Any) -> dict[str, Any]:
    unit = compile_source(source, "chains.yaml")
    errors = [d for d in unit.reporter.diagnostics if d.is_error]
    assert not errors, errors
    return run_embedded(unit.payload, overrides)


def test_case_result_sets_the_step_result_after_paginating() -> None:
    out = _run(PAGES)
    assert out["status"] == "completed", out["error"]
    assert out["steps"]["start"]["result"] == [1, 2, 3]
    assert out["steps"]["report"]["result"] == 3
    assert out["ctx"]["items"] == [1, 2, 3]


SAVE = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: save}
workload: {items: [1, 2]}
workflow:
  - step: start
    loop: {in: "{{ workload.items }}", iterator: item}
    tool:
      kind: python
      args: {item: "{{ item }}"}
      code: |
        result = {"v": item * 10}
    case:
      - when: "{{ event.name == 'call.done' and response.v > 10 }}"
        then:
          - save_item:
              tool:
                kind: python
                args: {v: "{{ response.v }}"}
                code: |
                  assert v != 30, "saved 30"
                  result = v
      - when: "{{ event.name == 'loop.done' }}"
        then:
          - next: [{step: end}]
  - step: end
    tool: {kind: noop}
"""


def test_case_named_task_runs_after_the_calls_it_matches_and_keeps_their_results() -> None:
    out = _run(SAVE)
    assert out["status"] == "completed", out["error"]
    # the iterations' results are the calls' results, not the saving task's
    assert out["steps"]["start"]["result"]["results"] == [{"v": 10}, {"v": 20}]
    assert out["steps"]["end"]["status"] == "done"
    failed = _run(SAVE, items=[1, 2, 3])  # the saving task runs for 30 and fails the loop
    assert failed["status"] == "failed"
    assert "saved 30" in str(failed["error"])


FORK = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fork}
workload: {count: 3}
workflow:
  - step: start
    tool:
      kind: python
      args: {count: "{{ workload.count }}"}
      code: |
        result = {"count": count}
    case:
      - when: "{{ event.name == 'call.done' and response.count > 0 }}"
        then:
          - call: {step: notify, args: {message: "{{ response.count }} items"}}
          - next: [{step: report}]
    next: [{step: report}]
  - step: notify
    tool: {kind: noop, input: "{{ args.message }}"}
  - step: report
    tool: {kind: noop}
"""


def test_case_call_step_starts_the_step_besides_the_routing() -> None:
    out = _run(FORK)
    assert out["status"] == "completed", out["error"]
    assert out["steps"]["notify"]["result"] == "3 items"
    assert out["steps"]["report"]["status"] == "done"
    quiet = _run(FORK, count=0)
    assert quiet["status"] == "completed", quiet["error"]
    assert "notify" not in quiet["steps"] or quiet["steps"]["notify"]["runs"] == 0
    assert quiet["steps"]["report"]["status"] == "done"


RETRY_SINK = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: retry_sink}
workflow:
  - step: start
    tool:
      kind: python
      args: {p: "{{ iter.params.page if iter.params is defined else 1 }}"}
      code: |
        result = {"page": p, "items": [p], "more": p < 3}
    retry:
      - when: "{{ response.more }}"
        then:
          max_attempts: 10
          next_call: {params: {page: "{{ response.page + 1 }}"}}
          collect: {from: response.items, into: pages, mode: extend}
          sink:
            tool:
              kind: python
              args: {rows: "{{ response.items }}", n: "{{ _retry.index }}"}
              code: |
                assert rows == [n], (rows, n)
                result = n
"""


def test_retry_sink_runs_after_each_repeated_call_with_its_number() -> None:
    out = _run(RETRY_SINK)
    assert out["status"] == "completed", out["error"]
    assert out["ctx"]["pages"] == [1, 2]  # the last page matches no policy: not collected
    assert out["steps"]["start"]["result"] == {"page": 3, "items": [3], "more": False}


def test_diagnostics_inside_a_chain_point_at_the_source() -> None:
    broken = SAVE.replace('args: {v: "{{ response.v }}"}', 'args: {v: "{{ response.v ) }}"}')
    unit = compile_source(broken, "chains.yaml")
    [error] = [d for d in unit.reporter.diagnostics if d.is_error]
    line = broken.splitlines().index('                args: {v: "{{ response.v ) }}"}') + 1
    assert error.span is not None and error.span.line == line


def test_tasks_after_a_failed_call_run_then_the_step_fails() -> None:
    # NoETL runs a `call.error` rule's tasks after the failed call (they used to be refused):
    # the call's error rule jumps to them, and the chain ends by failing the step
    source = SAVE.replace("'call.done' and response.v > 10", "'call.error'")
    unit = compile_source(source, "chains.yaml", until="desugar")
    assert [d.code for d in unit.reporter.diagnostics if d.is_error] == []
    assert unit.canonical is not None
    text = str(unit.canonical.to_python())
    assert "outcome.status == 'error'" in text and "'do': 'fail'" in text


FORK_JOIN = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fork_join}
workload: {count: 3}
workflow:
  - step: start
    tool:
      kind: python
      args: {count: "{{ workload.count }}"}
      code: |
        result = {"count": count}
    case:
      - when: "{{ event.name == 'call.done' and response.count > 0 }}"
        then:
          - call: {step: helper}
          - next: [{step: other}]
    next: [{step: other}]
  - step: helper
    tool: {kind: noop}
    next: [{step: verify}]
  - step: other
    tool: {kind: noop}
    next: [{step: verify}]
  - step: verify
    tool: {kind: noop}
"""


def test_a_called_step_and_the_routing_meet_at_a_join(tmp_path: Path) -> None:
    for count, helper_runs in ((3, 1), (0, 0)):
        out = _run(FORK_JOIN, count=count)
        assert out["status"] == "completed", out["error"]
        assert out["steps"]["verify"]["runs"] == 1
        assert out["steps"].get("helper", {"runs": 0})["runs"] == helper_runs
    playbook = tmp_path / "fork_join.yaml"
    playbook.write_text(FORK_JOIN, encoding="utf-8")
    unit = compile_source(FORK_JOIN, "fork_join.yaml")
    assert unit.canonical is not None
    arcs = unit.canonical.to_python()["workflow"][0]["next"]["arcs"]
    assert [a["step"] for a in arcs] == ["helper", "other"]  # one arc per target
    assert cli.main(["lint", str(playbook)]) == 0  # no join waits forever
