"""`kind: playbook` as NoETL's worker runs it, in the embedded runtime: without `return_step`
the child is started and not waited for (its failure is not the parent's), with it the task
waits and gives the child's status view; noetlc's `wait: true` gives the child's result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from noetlc.compiler.pipeline import compile_file
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import MemoryStore

CHILD = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: child, path: child}
workload: {fail: false}
workflow:
  - step: start
    tool:
      kind: python
      input: {fail: "{{ workload.fail }}"}
      code: |
        if fail:
            raise ValueError("the child fails")
        result = {"made": 7}
"""


def _parent(tmp_path: Path, call: str, fail: bool) -> tuple[dict[str, Any], MemoryStore]:
    (tmp_path / "child.yaml").write_text(CHILD)
    parent = tmp_path / "parent.yaml"
    parent.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: parent, path: parent}\n"
        "workflow:\n  - step: start\n    tool:\n      kind: playbook\n      path: child.yaml\n"
        f"      args: {{fail: {str(fail).lower()}}}\n{call}"
        "    next: [{step: after}]\n"
        "  - step: after\n    tool: {kind: noop, result: '{{ start }}'}\n"
    )
    unit = compile_file(parent)
    assert not unit.reporter.has_errors, unit.reporter.sorted()
    store = MemoryStore()
    return run_embedded(unit.payload, store=store), store


def _child_record(store: MemoryStore, parent_id: str) -> dict[str, Any]:
    (child,) = [r for r in store.executions() if r.get("parent_id") == parent_id]
    return child


def test_without_return_step_a_failing_child_is_started_and_the_parent_completes(
    tmp_path: Path,
) -> None:
    summary, store = _parent(tmp_path, "", fail=True)
    assert summary["status"] == "completed", summary["error"]
    started = summary["steps"]["start"]["result"]
    assert started["status"] == "success" and started["data"]["status"] == "started"
    child = _child_record(store, summary["execution_id"])
    assert started["execution_id"] == child["execution_id"]
    # the run returns once the child it started has ended too; the child failed on its own
    assert child["status"] == "failed"


def test_return_step_gives_the_status_view_and_a_failed_child_does_not_fail_the_call(
    tmp_path: Path,
) -> None:
    summary, store = _parent(tmp_path, "      return_step: start\n", fail=True)
    assert summary["status"] == "completed", summary["error"]
    view = summary["steps"]["start"]["result"]
    assert (view["failed"], view["completed"]) == (True, False)
    assert view["execution_id"] == _child_record(store, summary["execution_id"])["execution_id"]
    ok, _ = _parent(tmp_path, "      return_step: start\n", fail=False)
    view = ok["steps"]["start"]["result"]
    assert (view["failed"], view["completed"], view["result"]) == (False, True, {"made": 7})


def test_wait_true_gives_the_childs_result_and_its_failure(tmp_path: Path) -> None:
    summary, _ = _parent(tmp_path, "      wait: true\n", fail=False)
    assert summary["status"] == "completed", summary["error"]
    assert summary["steps"]["start"]["result"] == {"made": 7}
    failed, _ = _parent(tmp_path, "      wait: true\n", fail=True)
    assert failed["status"] == "failed"
