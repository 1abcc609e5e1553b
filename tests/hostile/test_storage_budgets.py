"""Storage budgets (embedded): a step whose result grows on every run of a cycle is stopped
by the execution's `stored_bytes` budget, one oversized result by `result_bytes`, each with
NOE858 naming what grew; a loop's huge result is kept by reference in the summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import vm_main
from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import SQLiteStore
from noetlc.runtime.logcheck import violations
from noetlc.runtime.results import SUMMARY_INLINE_BYTES

# every run returns the previous run's text and 200 KB more: storage grows with the square
GROWING = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: growing}
workload: {runs: 1000, chunk: 200000}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'n': 0, 'text': ''}"}
    next: {arcs: [{step: grow}]}
  - step: grow
    tool:
      kind: python
      input:
        prev: "{{ (grow if grow is defined else start).text }}"
        n: "{{ (grow if grow is defined else start).n }}"
        chunk: "{{ workload.chunk }}"
      code: |
        result = {"n": n + 1, "text": prev + "x" * chunk}
    next:
      arcs:
        - {step: grow, when: "{{ grow.n < workload.runs }}"}
        - {step: end, when: "{{ grow.n >= workload.runs }}"}
  - step: end
    tool: {kind: noop}
"""

WIDE = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: wide}
workload: {n: 120, size: 160000}
workflow:
  - step: each
    loop: {in: "{{ range(workload.n) | list }}", iterator: x}
    tool: {kind: python, input: {size: "{{ workload.size }}"}, code: "result = 'y' * size"}
"""


def _grow(tmp_path: Path, *options: str) -> tuple[int, dict[str, Any], Path]:
    (tmp_path / "growing.yaml").write_text(GROWING)
    db = tmp_path / "noetl.db"
    code = vm_main.main(
        [
            "run",
            str(tmp_path / "growing.yaml"),
            "--json",
            "--quiet",
            "--db",
            f"sqlite:///{db}",
            *list(options),
        ]
    )
    return code, {}, db


@pytest.mark.parametrize(
    ("budget", "limit", "runs"),
    [("stored_bytes", 20_000_000, 14), ("result_bytes", 1_000_000, 5)],
)
def test_a_result_that_grows_every_run_is_stopped_by_its_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], budget: str, limit: int, runs: int
) -> None:
    code, _, db = _grow(tmp_path, "--budget", f"{budget}={limit}")
    assert code == 1
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["status"] == "failed"
    error = summary["error"]
    assert error["code"] == "NOE853" and error["step"] == "grow"
    assert "step `grow`" in error["message"] and f"{budget} budget" in error["message"]
    assert summary["steps"]["grow"]["runs"] == runs  # the run that went over failed
    # the store holds what the budget let through, not the square of 1,000 runs
    assert db.stat().st_size < 3 * limit * (2 if budget == "result_bytes" else 1)
    store = SQLiteStore(str(db))
    [failed] = [
        e["payload"]["error"] for e in store.read(summary["execution_id"])
        if e["name"] == "step.failed"
    ]  # fmt: skip
    assert failed["code"] == "NOE858" and failed["budget"] == budget
    assert violations(store) == []
    store.close()
    # the failure is in the log as the step's result: replay decides the same way
    assert vm_main.main(["replay", summary["execution_id"], "--db", f"sqlite:///{db}"]) == 0


def test_a_huge_loop_result_is_kept_by_reference_in_the_summary(tmp_path: Path) -> None:
    unit = compile_source(WIDE, "wide.yaml")
    store = SQLiteStore(str(tmp_path / "noetl.db"))
    summary = run_embedded(unit.payload, store=store, execution_id="wide-1")
    assert summary["status"] == "completed"
    result = summary["steps"]["each"]["result"]
    assert set(result) == {"$ref"} and result["$ref"]["size"] > SUMMARY_INLINE_BYTES
    stored = store.execution("wide-1")
    assert stored is not None and len(json.dumps(stored["summary"])) < 10_000
    value = json.loads(store.get_result(result["$ref"]["key"]) or b"null")
    assert len(value["results"]) == 120 and value["stats"]["success"] == 120
    store.close()
