"""Per-execution budgets: a cycle that never ends, a runaway loop, a growing ctx and a
pipeline that jumps forever each stop with NOE858 and the counts; a playbook or the command
line sets them; replay goes over a budget at the same event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import vm_main
from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import MemoryStore
from noetlc.runtime.replay import check
from noetlc.vm import budgets
from noetlc.vm.loaded_program import LoadedProgram

CYCLE = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: cycle, path: t/cycle}
workload: {stop: false}
BUDGETS
workflow:
  - step: start
    tool: {kind: noop}
    next: spin
  - step: spin
    tool: {kind: noop}
    set: {n: "{{ (ctx.n | default(0)) + 1 }}"}
    next:
      arcs:
        - {step: end, when: "{{ workload.stop }}"}
        - {step: spin}
  - step: end
    tool: {kind: noop}
"""

LOOP = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: loop, path: t/loop}
BUDGETS
workflow:
  - step: start
    loop: {in: "{{ range(1000) }}", iterator: i}
    tool: {kind: noop}
"""

GROW = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: grow, path: t/grow}
BUDGETS
workflow:
  - step: start
    tool: {kind: noop}
    next: grow
  - step: grow
    tool: {kind: noop}
    next:
      arcs:
        - {step: end, when: "{{ (ctx.big | default([])) | length > 10 ** 9 }}"}
        - step: grow
          set: {ctx.big: "{{ (ctx.big | default([])) + range(1000) | list }}"}
  - step: end
    tool: {kind: noop}
"""

JUMPS = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: jumps, path: t/jumps}
workflow:
  - step: start
    tool:
      - ping:
          kind: noop
          spec:
            policy:
              rules:
                - then: {do: jump, to: ping}
"""


def _payload(text: str, limits: dict[str, int] | None = None) -> dict[str, Any]:
    block = "" if limits is None else f"executor: {{spec: {{budgets: {json.dumps(limits)}}}}}"
    unit = compile_source(text.replace("BUDGETS", block), "t.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    payload: dict[str, Any] = unit.payload
    return payload


def _run(payload: dict[str, Any]) -> tuple[dict[str, Any], MemoryStore]:
    store = MemoryStore()
    return run_embedded(payload, {}, store), store


def test_a_cycle_that_never_ends_is_stopped_by_its_budget() -> None:
    payload = _payload(CYCLE, {"step_runs": 50})
    summary, store = _run(payload)
    assert summary["status"] == "failed"
    error = summary["error"]
    assert error["code"] == "NOE858" and error["budget"] == "step_runs"
    assert error["counts"]["step_runs"] == 51
    events = store.read(summary["execution_id"])
    report = check(LoadedProgram(payload), summary["execution_id"], {"stop": False}, events)
    assert report.ok, report.divergence  # replay goes over the budget at the same event


@pytest.mark.parametrize(
    ("text", "limits", "budget"),
    [
        (CYCLE, {"events": 300}, "events"),
        (LOOP, {"loop_iterations": 100}, "loop_iterations"),
        (GROW, {"ctx_size": 20_000}, "ctx_size"),
    ],
)
def test_each_budget_fails_the_execution_with_its_counts(
    text: str, limits: dict[str, int], budget: str
) -> None:
    summary, _ = _run(_payload(text, limits))
    error = summary["error"]
    assert summary["status"] == "failed" and error["code"] == "NOE858", error
    assert error["budget"] == budget
    assert error["counts"][budget] > limits[budget]


def test_zero_means_no_limit_and_defaults_apply_otherwise() -> None:
    summary, _ = _run(_payload(LOOP, {"loop_iterations": 0}))
    assert summary["status"] == "completed"
    assert budgets.budgets_of({}) == budgets.DEFAULTS
    summary, _ = _run(_payload(LOOP, {"loop_iterations": 999}))
    assert summary["error"]["budget"] == "loop_iterations"


def test_a_pipeline_that_jumps_forever_is_stopped() -> None:
    summary, _ = _run(_payload(JUMPS))
    assert summary["status"] == "failed"
    assert "went over its budget" in json.dumps(summary["error"]), summary["error"]


def test_the_command_line_sets_budgets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cycle.yaml"
    path.write_text(CYCLE.replace("BUDGETS", ""))
    status = vm_main.main(
        ["run", str(path), "--db", "memory:", "--json", "--budget", "step_runs=20"]
    )
    out = capsys.readouterr().out.strip().splitlines()[-1]
    assert status == 1
    error = json.loads(out)["error"]
    assert error["code"] == "NOE858" and error["counts"]["step_runs"] == 21
    assert vm_main.main(["run", str(path), "--db", "memory:", "--budget", "steps=1"]) == 2
    assert "error[NOE800]" in capsys.readouterr().err


def test_a_negative_budget_in_the_playbook_is_a_located_error() -> None:
    text = CYCLE.replace("BUDGETS", "executor: {spec: {budgets: {events: -1}}}")
    unit = compile_source(text, "t.yaml")
    [diag] = [d for d in unit.reporter.diagnostics if d.is_error]
    assert diag.code == "NOE103" and diag.span.line == 5
