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

HERE = Path(__file__).resolve().parent
CONFORMANCE = HERE.parents[2] / "shared" / "corpus" / "conformance"
EXAMPLES = HERE.parents[1] / "examples"
CASES = sorted(CONFORMANCE.glob("c[0-9][0-9]_*[!t].yaml")) if CONFORMANCE.is_dir() else []
# the HTTP example needs its server thread; the rest run anywhere
PLAYBOOKS = [
    *CASES,
    *(p for p in sorted(EXAMPLES.glob("*.yaml")) if p.stem != "http_pagination"),
    HERE / "playbooks" / "handled_branch.yaml",
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
    got = run_embedded(unit.artifacts["payload"], workload)
    assert got["status"] == expected["status"]
    steps = {
        name: {"runs": s["runs"], "status": s["status"], "result": _norm(s["result"])}
        for name, s in got["steps"].items()
    }
    assert steps == _norm(expected["steps"])
    assert _norm(got["ctx"]) == _norm(expected["ctx"])
