"""The specialised `step.done` of plain steps (`StepTable.done_plan`, `plain_rule`) against the
general router: the same VM fed the same results, once with the plans and once with every plan
removed, must issue the same commands (action ids included), record the same events and count
the same firings — on hand-written shapes (one route, a guarded route with no else, an
exclusive pair, args, an end, a guard that fails, a target with admission rules) and on the
generated workflows of the differential test."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.vm.control import ControlVM
from noetlc.vm.program import Program
from noetlc.vm.protocol import Event

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("vm_reference_test", HERE / "test_vm_reference.py")
assert _spec is not None and _spec.loader is not None
reference_test = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference_test)

SHAPES = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: shapes, path: t/shapes}
workload: {n: 3, limit: 2}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: count, args: {k: "{{ workload.n }}"}}]}
  - step: count
    tool: {kind: noop}
    next:
      spec: {mode: exclusive}
      arcs:
        - step: count
          when: "{{ (ctx.i | default(0)) < workload.n }}"
        - step: guarded
  - step: guarded
    tool: {kind: noop}
    next: {arcs: [{step: admitted, when: "{{ args.k | default(1) > 0 }}"}]}
  - step: admitted
    spec:
      policy:
        admit:
          rules:
            - when: "{{ (ctx.i | default(0)) > workload.limit }}"
              then: {allow: true}
            - else: {then: {allow: false}}
    tool: {kind: noop}
    next: {arcs: [{step: broken, when: "{{ event.data.result.ok }}"}]}
  - step: broken
    tool: {kind: noop}
    next: {arcs: [{step: finish, when: "{{ 1 // (ctx.zero | default(0)) }}"}]}
  - step: finish
    tool: {kind: noop}
"""


def _trace(program: Program, general: bool, results: list[Any]) -> list[Any]:
    vm = ControlVM(program, dict(program.workload), "exec-plans")
    if general:
        for table in vm.tables.values():
            table.done_plan = None
            table.plain_rule = None
    out: list[Any] = []
    queue = list(vm.start().commands)
    out.append([c.key() for c in queue])
    n = 0
    while queue and not vm.finished() and n < 500:
        command = queue.pop(0)
        n += 1
        if command.step == "count":
            vm.ctx["i"] = vm.ctx.get("i", 0) + 1
        loop = command.iteration is not None
        event = Event(
            "loop.iteration.done" if loop else "step.done",
            "worker",
            command.step,
            command.step_run_id,
            command.iteration,
            {"result": results[n % len(results)]},
        )
        commands, events = vm.step(event)
        out.append([(c.key(), c.args, c.item) for c in commands])
        out.append([events, vm.firings, vm.status, vm.error])
        queue.extend(commands)
    out.append([vm.ctx, {k: (r.runs, r.status, r.result) for k, r in vm.steps.items()}])
    return out


def _program(text: str) -> Program:
    unit = compile_source(text, "t.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    return Program(unit.payload)


@pytest.mark.parametrize("results", [[None], [{"ok": True}], [{"ok": False}, {"v": 3}]])
def test_plans_match_the_general_router_on_each_shape(results: list[Any]) -> None:
    planned = _trace(_program(SHAPES), False, results)
    assert planned == _trace(_program(SHAPES), True, results)
    plans = ControlVM(_program(SHAPES), {}, "x").tables
    assert all(plans[s].done_plan is not None for s in ("start", "count", "guarded", "broken"))
    assert plans["admitted"].plain_rule is None and plans["count"].plain_rule is not None


@pytest.mark.parametrize("seed", range(0, 300, 5))
def test_plans_match_the_general_router_on_generated_workflows(seed: int) -> None:
    text = reference_test._generate(seed)
    results = [{"v": seed % 10}, {"v": (seed * 3) % 10}]
    assert _trace(_program(text), False, results) == _trace(_program(text), True, results)
