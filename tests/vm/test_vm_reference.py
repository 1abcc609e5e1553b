"""Differential test: the VMs against the reference interpreter (tests/vm/reference.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from noetlc.compiler.pipeline import compile_file
from noetlc.runtime.embedded import run_embedded
from tests.conftest import CONFORMANCE

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples"
CASES = sorted(CONFORMANCE.glob("c[0-9][0-9]_*[!t].yaml"))
# the HTTP example needs its server thread; the rest run anywhere
PLAYBOOKS = [
    *CASES,
    *(p for p in sorted(EXAMPLES.glob("*.yaml")) if p.stem != "http_pagination"),
    HERE / "playbooks" / "handled_branch.yaml",
    HERE / "playbooks" / "loop_head_in_fork.yaml",
    HERE / "playbooks" / "loop_through_join.yaml",
]

_spec = importlib.util.spec_from_file_location("noetl_reference", HERE / "reference.py")
assert _spec is not None and _spec.loader is not None
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)


def _sets(path: Path) -> dict[str, Any]:
    expect = path.with_name(path.stem + ".expect.yaml")
    if not expect.is_file():
        return {}
    return dict(yaml.safe_load(expect.read_text()).get("set") or {})


def _norm(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, sort_keys=True))


@pytest.mark.parametrize("path", PLAYBOOKS, ids=[p.stem for p in PLAYBOOKS])
def test_vm_agrees_with_the_reference_interpreter(path: Path) -> None:
    unit = compile_file(str(path))
    playbook = unit.playbook
    assert playbook is not None
    workload = _sets(path)
    expected = reference.Reference(playbook, workload).run()
    got = run_embedded(unit.payload, workload)
    assert got["status"] == expected["status"]
    steps = {
        name: {"runs": s["runs"], "status": s["status"], "result": _norm(s["result"])}
        for name, s in got["steps"].items()
    }
    assert steps == _norm(expected["steps"])
    unordered = _appended_by_parallel_loops(yaml.safe_load(path.read_text()))
    assert _ctx(got["ctx"], unordered) == _ctx(expected["ctx"], unordered)


def _appended_by_parallel_loops(playbook: dict[str, Any]) -> set[str]:
    """ctx keys that iterations of a parallel loop `append` to. The VM appends in the order it
    consumes the iterations' results, which is the order they finish: not defined (the
    reference interpreter runs them in input order), so only the lists' contents compare."""
    keys: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in (node.get("set_ctx") or {}).items():
                if isinstance(value, dict) and "append" in value:
                    keys.add(key)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for step in playbook.get("workflow") or []:
        loop = step.get("loop") or {}
        if (loop.get("spec") or {}).get("mode") == "parallel":
            walk(step)
    return keys


def _ctx(ctx: dict[str, Any], unordered: set[str]) -> Any:
    normed = _norm(ctx)
    for key in unordered & set(normed):
        normed[key] = sorted(normed[key], key=json.dumps)
    return normed


# ---------------------------------------------------------------- generated workflows


def _generate(seed: int) -> str:
    """A random structured workflow: sequences, exclusive choices that merge, inclusive forks
    into AND-joins, admission rules, loops and failing steps with failure arcs."""
    import random

    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    counter = iter(range(10_000))

    def new_step(kind: str = "plain") -> dict[str, Any]:
        name = f"s{next(counter)}"
        k = rng.randint(1, 9)
        step: dict[str, Any] = {"step": name}
        if kind == "loop":
            step["loop"] = {
                "in": "{{ workload.numbers }}",
                "iterator": "x",
                "spec": {"mode": rng.choice(["sequential", "parallel"])},
            }
            step["tool"] = {
                "kind": "python",
                "input": {"x": "{{ iter.x }}"},
                "code": f"result = {{'v': (x * {k}) % 10}}",
            }
        elif kind == "failing":
            step["tool"] = {"kind": "python", "code": "raise ValueError('generated failure')"}
        else:
            step["tool"] = {
                "kind": "python",
                "input": {"s": "{{ workload.seed }}"},
                "code": f"result = {{'v': (s * {k} + {len(steps)}) % 10}}",
            }
        if rng.random() < 0.15:
            step["spec"] = {
                "policy": {
                    "admit": {
                        "rules": [
                            {
                                "when": f"{{{{ workload.seed % 4 == {rng.randint(0, 3)} }}}}",
                                "then": {"allow": False},
                            },
                            {"else": {"then": {"allow": True}}},
                        ]
                    }
                }
            }
        steps.append(step)
        return step

    def block(depth: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """Returns (first step, last step) of a block."""
        choice = rng.random() if depth < 3 else 0.0
        if choice < 0.35:
            s = new_step(rng.choice(["plain", "plain", "loop"]))
            return s, s
        if choice < 0.55:
            a_first, a_last = block(depth + 1)
            b_first, b_last = block(depth + 1)
            a_last["next"] = {"arcs": [{"step": b_first["step"]}]}
            return a_first, b_last
        head = new_step()
        branches = [block(depth + 1) for _ in range(rng.randint(2, 3))]
        tail = new_step()
        if choice < 0.8:  # exclusive choice, then a merge
            arcs = [
                {"step": f["step"], "when": f"{{{{ {head['step']}.v > {rng.randint(0, 9)} }}}}"}
                for f, _ in branches[:-1]
            ] + [{"step": branches[-1][0]["step"]}]
            head["next"] = {"spec": {"mode": "exclusive"}, "arcs": arcs}
        else:  # inclusive fork, then an AND-join
            arcs = [
                {"step": f["step"]}
                if i == 0
                else {"step": f["step"], "when": f"{{{{ workload.seed % 3 != {i} }}}}"}
                for i, (f, _) in enumerate(branches)
            ]
            head["next"] = {"spec": {"mode": "inclusive"}, "arcs": arcs}
        for _, last in branches:
            last["next"] = {"arcs": [{"step": tail["step"]}]}
        if rng.random() < 0.3:  # one branch fails, and the failure is routed to the join
            failing = new_step("failing")
            first, last = branches[0]
            head["next"]["arcs"][0]["step"] = failing["step"]
            failing["next"] = {
                "arcs": [
                    {"step": first["step"], "when": "{{ event.name == 'step.done' }}"},
                    {"step": tail["step"], "when": "{{ event.name == 'step.failed' }}"},
                ]
            }
            if head["next"]["spec"]["mode"] == "inclusive":
                failing["next"]["arcs"] = failing["next"]["arcs"][:1]  # unhandled: fails
        return head, tail

    first, _ = block(0)
    steps.remove(first)
    first["step"], old = "start", first["step"]
    text = yaml.safe_dump(
        {
            "apiVersion": "noetl.io/v2",
            "kind": "Playbook",
            "metadata": {"name": f"gen{seed}", "path": f"gen/{seed}"},
            "workload": {"seed": seed % 7, "numbers": [1, 2, 3]},
            "workflow": [first, *steps],
        },
        sort_keys=False,
    )
    return text.replace(f"step: {old}\n", "step: start\n").replace(f"{{{{ {old}.", "{{ start.")


@pytest.mark.parametrize("seed", range(300))
def test_generated_workflows_agree(seed: int, tmp_path: Path) -> None:
    path = tmp_path / f"gen{seed}.yaml"
    path.write_text(_generate(seed))
    unit = compile_file(str(path))
    assert not unit.reporter.has_errors, (unit.reporter.sorted(), path.read_text())
    assert unit.playbook is not None
    expected = reference.Reference(unit.playbook, {}).run()
    got = run_embedded(unit.payload)
    assert got["status"] == expected["status"], path.read_text()
    if got["status"] == "failed":
        return  # branches running beside the failure legitimately differ in how far they got
    steps = {
        name: {"runs": s["runs"], "status": s["status"], "result": _norm(s["result"])}
        for name, s in got["steps"].items()
        if s["runs"] or s["status"]
    }
    want = {n: s for n, s in _norm(expected["steps"]).items() if s["runs"] or s["status"]}
    assert steps == want, path.read_text()
