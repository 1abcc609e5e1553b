"""Exclusive routing negates the earlier arcs by rank (a transition's `earlier n`): the VM checks each
earlier guard once per decision and must still fire exactly the first match (exclusive routing),
whatever the arcs write to ctx; inclusive routing fires every match, re-evaluated after writes.
Every combination of guard values is checked against a direct first-match oracle."""

from __future__ import annotations

from itertools import product
from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.vm.control import ControlVM
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.protocol import Event

EXCLUSIVE = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: exclusive_rank, path: t/exclusive_rank}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      spec: {mode: exclusive}
      arcs:
        - step: a0
          when: "{{ workload.x0 }}"
        - step: a1
          when: "{{ workload.x1 }}"
          set: {ctx.flip: 1}
        - step: a2
          when: "{{ workload.x2 or (ctx.flip | default(0)) == 1 }}"
        - step: a3
          when: "{{ workload.x1 }}"
        - step: a4
          when: "{{ workload.x3 }}"
        - step: a5
%(steps)s"""

INCLUSIVE = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: inclusive_rank, path: t/inclusive_rank}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      spec: {mode: inclusive}
      arcs:
        - step: a0
          when: "{{ workload.x0 }}"
          set: {ctx.y: 1}
        - step: a1
          when: "{{ workload.x1 or (ctx.y | default(0)) == 1 }}"
        - step: a2
          when: "{{ workload.x2 }}"
%(steps)s"""


def _steps(n: int) -> str:
    return "".join(f"  - step: a{i}\n    tool: {{kind: noop}}\n" for i in range(n))


def _first_decision(text: str, workload: dict[str, Any]) -> list[str]:
    unit = compile_source(text, "t.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    vm = ControlVM(LoadedProgram(unit.payload), workload, "x")
    [start] = vm.start().commands
    commands = vm.step(
        Event("step.done", "worker", start.step, start.step_run_id, payload={"result": None})
    ).commands
    return [c.step for c in commands]


@pytest.mark.parametrize("bits", list(product((False, True), repeat=4)))
def test_exclusive_fires_exactly_the_first_match(bits: tuple[bool, ...]) -> None:
    x0, x1, x2, x3 = bits
    workload = {"x0": x0, "x1": x1, "x2": x2, "x3": x3}
    guards = [x0, x1, x2, x1, x3, True]  # a3 shares a1's guard; a5 has no `when`
    expected = f"a{guards.index(True)}"
    assert _first_decision(EXCLUSIVE % {"steps": _steps(6)}, workload) == [expected]


@pytest.mark.parametrize("bits", list(product((False, True), repeat=3)))
def test_inclusive_fires_every_match_and_ends_when_none(bits: tuple[bool, ...]) -> None:
    x0, x1, x2 = bits
    workload = {"x0": x0, "x1": x1, "x2": x2}
    expected = [f"a{i}" for i, hit in enumerate([x0, x1 or x0, x2]) if hit]
    vm_steps = _first_decision(INCLUSIVE % {"steps": _steps(3)}, workload)
    assert vm_steps == expected


ADMISSION = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: admission_rank, path: t/admission_rank}
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: gated}]}
  - step: gated
    spec:
      policy:
        admit:
          rules:
            - when: "{{ workload.x0 }}"
              then: {allow: false}
            - when: "{{ workload.x1 }}"
              then: {allow: true}
            - when: "{{ workload.x0 }}"
              then: {allow: true}
            - when: "{{ workload.x2 }}"
              then: {allow: false}
    tool: {kind: noop}
"""


@pytest.mark.parametrize("bits", list(product((False, True), repeat=3)))
def test_admission_takes_the_first_matching_rule(bits: tuple[bool, ...]) -> None:
    x0, x1, x2 = bits
    rules = [(x0, False), (x1, True), (x0, True), (x2, False), (True, True)]  # no match: allowed
    allowed = next(allow for hit, allow in rules if hit)
    workload = {"x0": x0, "x1": x1, "x2": x2}
    assert _first_decision(ADMISSION, workload) == (["gated"] if allowed else [])
