"""The synthetic playbooks of bench/ compile cleanly and mean what their names say (small
sizes: this is about correctness, not time); the BPMN peers' files are well-formed."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import yaml

from noetlc.bench import bpmn, generators
from noetlc.bench.workflows import WORKFLOWS, payload, run, tool_calls
from noetlc.compiler.pipeline import compile_source


@pytest.mark.parametrize(
    "source",
    [
        generators.chain(5),
        generators.fanout(25),
        generators.loops(3),
        generators.guards(4),
        generators.payload(1),
        generators.big_loop(5, "parallel", tasks=3),
        *generators.nested(3).values(),
    ],
    ids=["chain", "fanout", "loops", "guards", "payload", "parallel_loop", "n0", "n1", "n2"],
)
def test_generated_playbooks_compile(source: str) -> None:
    unit = compile_source(source)
    assert not unit.reporter.has_errors, unit.reporter.sorted()[:3]
    assert unit.payload is not None


@pytest.mark.parametrize("name", list(WORKFLOWS))
def test_the_design_workflows_run(name: str) -> None:
    summary = run(payload(name, 7), None)
    steps = summary["steps"]
    if name == "chain":
        assert len(steps) == 7 and all(s["runs"] == 1 for s in steps.values())
    elif name == "loop":
        assert steps["start"]["result"]["results"] == [None] * 7 and steps["end"]["runs"] == 1
    else:
        assert steps["decide"]["runs"] == 7 and summary["ctx"]["i"] == 7
    assert summary["events"] >= tool_calls(name, 7)


def test_nested_playbooks_call_the_next_level() -> None:
    files = generators.nested(3, width=2)
    level0 = yaml.safe_load(files["level0.yaml"])
    assert level0["workflow"][0]["tool"]["path"] == "bench/nested/level1"
    assert yaml.safe_load(files["level2.yaml"])["workflow"][0]["tool"] == {"kind": "noop"}


def test_noetl_cli_dialect() -> None:
    doc = yaml.safe_load(generators.noetl_decisions(4))
    decide = doc["workflow"][1]
    assert decide["vars"] == {"i": "{{ decide.result }}"}
    assert decide["next"]["arcs"][0]["when"] == "{{ vars.i }} != {{ workload.n }}"
    assert len(yaml.safe_load(generators.noetl_chain(4))["workflow"]) == 4


@pytest.mark.parametrize(
    ("xml", "tasks"),
    [(bpmn.chain(4), 4), (bpmn.loop(10), 1), (bpmn.decisions(10), 2)],
    ids=["chain", "loop", "decisions"],
)
def test_bpmn_is_well_formed(xml: str, tasks: int) -> None:
    root = ET.fromstring(xml)
    ns = {"bpmn": "http://www.omg.org/spec/BPMN/20100524/MODEL"}
    process = root.find("bpmn:process", ns)
    assert process is not None
    assert len(process.findall("bpmn:scriptTask", ns)) == tasks
    ids = {e.get("id") for e in process}
    for flow in process.findall("bpmn:sequenceFlow", ns):
        assert flow.get("sourceRef") in ids and flow.get("targetRef") in ids
