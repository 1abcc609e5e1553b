"""A legacy `case:` with a `call: {step}` action: an inclusive router whose other arcs keep
their first-match meaning as stopping arcs (`spec: {stop: true}`, compiler/desugar/case/router.py).

The desugared guards stay linear in the number of rules (each arc carries its own condition,
not the negations of every earlier one), and the VMs fire exactly what first-match order
fires: the `call`ed steps of the rules up to the first routing rule that matches, that rule's
`next`, or the structural `next` when no routing rule matched."""

from __future__ import annotations

import importlib.util
from itertools import product
from pathlib import Path
from typing import Any

import pytest

from noetlc.analysis.lint import lint_source
from noetlc.compiler.pipeline import compile_source
from noetlc.compiler.ynodes import YMap, YScalar, YSeq
from noetlc.runtime.embedded import run_embedded
from noetlc.vm.control import ControlVM
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.protocol import Event

_REFERENCE = Path(__file__).resolve().parents[1] / "vm" / "reference.py"
_spec = importlib.util.spec_from_file_location("noetl_reference_case", _REFERENCE)
assert _spec is not None and _spec.loader is not None
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)


def _many_rules(n: int) -> str:
    rules = "".join(
        f'      - when: "{{{{ workload.x{i} > {i} }}}}"\n'
        f"        then:\n"
        f"          - call: {{step: helper}}\n"
        f"          - next: [{{step: t{i}}}]\n"
        for i in range(n)
    )
    return (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: many_rules}\nworkflow:\n"
        "  - step: start\n    tool: {kind: noop}\n    case:\n" + rules + "    next: [end]\n"
    )


def _guard_text_size(n: int) -> int:
    unit = compile_source(_many_rules(n), "many.yaml", until="desugar")
    assert unit.canonical is not None
    workflow = unit.canonical.get("workflow")
    assert isinstance(workflow, YSeq) and isinstance(workflow.items[0], YMap)
    router = workflow.items[0].get("next")
    assert isinstance(router, YMap)
    arcs = router.get("arcs")
    assert isinstance(arcs, YSeq) and len(arcs) == 2 * n + 1
    size = 0
    for arc in arcs.items:
        assert isinstance(arc, YMap)
        when = arc.get("when")
        size += len(str(when.value)) if isinstance(when, YScalar) else 0
    return size


def test_first_match_guards_grow_linearly_with_the_rules() -> None:
    small, large = _guard_text_size(100), _guard_text_size(1000)
    # 10x the rules: 10x the text, plus the longer numbers (`x999 > 999`)
    assert large <= 12 * small, f"{small} characters of guards for 100 rules, {large} for 1000"


PLAYBOOK = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: case_first_match, path: t/case_first_match}
workflow:
  - step: start
    tool: {kind: noop}
    case:
      - when: "{{ workload.a }}"
        then:
          - next: [{step: first}]
      - when: "{{ workload.b }}"
        then:
          - call: {step: helper_b}
          - next: [{step: second}]
      - when: "{{ workload.c }}"
        then:
          - call: {step: helper_c}
      - when: "{{ workload.d }}"
        then:
          - next: [{step: third}]
      - when: "{{ workload.b }}"
        then:
          - next: [{step: never}]
    next: [{step: fallback}]
%(steps)s"""
STEPS = ("first", "second", "third", "never", "fallback", "helper_b", "helper_c")
SOURCE = PLAYBOOK % {"steps": "".join(f"  - step: {s}\n    tool: {{kind: noop}}\n" for s in STEPS)}
# (condition, called step, routed step) per rule, in order
RULES = (("a", None, "first"), ("b", "helper_b", "second"), ("c", "helper_c", None))
RULES += (("d", None, "third"), ("b", None, "never"))


def _first_match(workload: dict[str, bool]) -> list[str]:
    """The oracle: rules in order; a rule that routes and matches ends the routing."""
    fired: list[str] = []
    for condition, called, routed in RULES:
        if workload[condition]:
            fired += [s for s in (called, routed) if s is not None]
            if routed is not None:
                return fired
    return [*fired, "fallback"]


WORKLOADS = [dict(zip("abcd", values, strict=True)) for values in product((False, True), repeat=4)]


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda w: "".join(k for k, v in w.items() if v))
def test_the_control_vm_fires_the_first_match(workload: dict[str, bool]) -> None:
    unit = compile_source(SOURCE, "case.yaml")
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    vm = ControlVM(LoadedProgram(unit.payload), workload, "x")
    [start] = vm.start().commands
    commands = vm.step(
        Event("step.done", "worker", start.step, start.step_run_id, payload={"result": None})
    ).commands
    assert sorted(c.step for c in commands) == sorted(_first_match(workload))


@pytest.mark.parametrize(
    "workload", WORKLOADS[::3], ids=lambda w: "".join(k for k, v in w.items() if v)
)
def test_a_whole_run_agrees_with_the_reference(workload: dict[str, Any]) -> None:
    unit = compile_source(SOURCE, "case.yaml")
    assert unit.playbook is not None
    expected = reference.Reference(unit.playbook, workload).run()
    got = run_embedded(unit.payload, workload)
    assert got["status"] == expected["status"] == "completed"
    ran = {name for name, s in got["steps"].items() if s["runs"]}
    assert ran == {name for name, s in expected["steps"].items() if s["runs"]}
    assert ran == {"start", *_first_match(workload)}


# The called and routed steps meet at an AND-join: every branch not taken (a condition that
# does not hold, or an arc after the first match) must reach it as a dead token.
JOIN_STEPS = ("first", "second", "third", "never", "fallback", "helper_b", "helper_c")
JOIN_SOURCE = PLAYBOOK % {
    "steps": "".join(
        f"  - step: {s}\n    tool: {{kind: noop}}\n    next: [{{step: meet}}]\n" for s in JOIN_STEPS
    )
    + "  - step: meet\n    tool: {kind: noop}\n"
}


def test_the_join_after_a_first_match_case_cannot_wait_forever() -> None:
    report = lint_source(JOIN_SOURCE, "join.yaml")
    assert [d.code for d in report.diagnostics if d.is_error] == []
    assert report.soundness is not None and report.soundness.findings == []


@pytest.mark.parametrize(
    "workload", WORKLOADS[::3], ids=lambda w: "".join(k for k, v in w.items() if v)
)
def test_the_join_runs_once_after_the_first_match(workload: dict[str, Any]) -> None:
    unit = compile_source(JOIN_SOURCE, "join.yaml")
    assert unit.playbook is not None
    expected = reference.Reference(unit.playbook, workload).run()
    got = run_embedded(unit.payload, workload)
    assert got["status"] == expected["status"] == "completed"
    assert got["steps"]["meet"]["runs"] == expected["steps"]["meet"]["runs"] == 1
    ran = {name for name, s in got["steps"].items() if s["runs"]}
    assert ran == {"start", "meet", *_first_match(workload)}


# The canonical form the desugaring writes: an inclusive router with stopping arcs.
STOPPING = """
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: stopping_arcs, path: t/stopping_arcs}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      spec: {mode: inclusive}
      arcs:
        - {step: a0, when: "{{ workload.x0 }}"}
        - {step: a1, when: "{{ workload.x1 }}", spec: {stop: true}}
        - {step: a2, when: "{{ workload.x2 }}"}
        - {step: a3, when: "{{ workload.x3 }}", spec: {stop: true}}
        - {step: a4, when: "{{ workload.x1 }}"}
%(steps)s"""
STOPPING_SOURCE = STOPPING % {
    "steps": "".join(f"  - step: a{i}\n    tool: {{kind: noop}}\n" for i in range(5))
}
STOPS = (("x0", "a0", False), ("x1", "a1", True), ("x2", "a2", False), ("x3", "a3", True))
STOPS += (("x1", "a4", False),)


@pytest.mark.parametrize("values", list(product((False, True), repeat=4)))
def test_an_inclusive_router_fires_every_match_up_to_a_stopping_arc(
    values: tuple[bool, ...],
) -> None:
    workload = {f"x{i}": v for i, v in enumerate(values)}
    expected: list[str] = []
    for name, target, stops in STOPS:
        if workload[name]:
            expected.append(target)
            if stops:
                break
    unit = compile_source(STOPPING_SOURCE, "stop.yaml")
    assert unit.playbook is not None and not unit.reporter.has_errors
    got = run_embedded(unit.payload, workload)
    reference_run = reference.Reference(unit.playbook, workload).run()
    ran = sorted(n for n, s in got["steps"].items() if s["runs"] and n != "start")
    assert ran == sorted(n for n, s in reference_run["steps"].items() if s["runs"] and n != "start")
    assert ran == sorted(expected)


def test_stop_must_be_a_boolean() -> None:
    unit = compile_source(STOPPING_SOURCE.replace("stop: true", "stop: maybe", 1), "stop.yaml")
    assert [d.code for d in unit.reporter.diagnostics if d.is_error] == ["NOE103"]
