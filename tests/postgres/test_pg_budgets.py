"""Distributed budgets: a playbook that calls itself stops at its `child_depth` budget, a
result past `result_bytes` is not stored; the step fails with NOE858 and every execution
ends."""

from __future__ import annotations

import time
from pathlib import Path

from noetlc.runtime.postgres.cluster_testing import Cluster
from noetlc.runtime.postgres.event_store import PostgresStore

ITSELF = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: itself}
executor: {spec: {budgets: {child_depth: 3}}}
workflow:
  - step: start
    tool: {kind: playbook, path: itself.yaml, wait: true}
"""


def test_a_distributed_playbook_that_calls_itself_stops_at_its_depth(
    cluster: Cluster, tmp_path: Path
) -> None:
    (tmp_path / "itself.yaml").write_text(ITSELF)
    cluster.server()
    cluster.worker(concurrency=2)
    summary = cluster.submit(tmp_path / "itself.yaml", timeout=120)
    assert summary["status"] == "failed"
    store = PostgresStore(cluster.url)
    try:
        tree = [r for r in store.executions() if r["playbook"] == "itself"]
        assert len(tree) == 4  # the root and three levels
        assert {r["status"] for r in tree} == {"failed"}
        errors = [
            e["payload"]["error"]
            for r in tree
            for e in store.read(r["execution_id"])
            if e["name"] == "step.failed" and e["payload"]["error"].get("code") == "NOE858"
        ]
        assert [e["child_error"]["budget"] for e in errors] == ["child_depth"]
    finally:
        store.close()


BIG = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: big}
executor: {spec: {budgets: {result_bytes: 1000000}}}
workflow:
  - step: start
    tool: {kind: python, code: "result = 'z' * 2000000"}
"""


def test_a_distributed_result_past_its_budget_fails_its_step(
    cluster: Cluster, tmp_path: Path
) -> None:
    (tmp_path / "big.yaml").write_text(BIG)
    cluster.server()
    cluster.worker()
    summary = cluster.submit(tmp_path / "big.yaml", timeout=120)
    assert summary["status"] == "failed"
    [failed] = [e for e in cluster.events(summary["execution_id"]) if e["name"] == "step.failed"]
    error = failed["payload"]["error"]
    assert error["code"] == "NOE858" and error["budget"] == "result_bytes"
    assert "step `start` is 2,000,002 bytes" in error["message"]


FAN = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fan}
executor: {spec: {budgets: {child_executions: 5}}}
workload: {items: [1, 2, 3]}
workflow:
  - step: start
    loop: {in: "{{ workload.items }}", iterator: x, spec: {mode: parallel, max_in_flight: 3}}
    tool: {kind: playbook, path: middle.yaml, wait: true}
"""

MIDDLE = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: middle}
workflow:
  - step: start
    tool: {kind: playbook, path: leaf.yaml, wait: true}
"""

LEAF = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: leaf}
workflow:
  - step: start
    tool: {kind: noop, result: 1}
"""


def test_a_distributed_fan_out_stops_at_its_roots_child_executions(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Three callers of a child that calls another: six executions below the root, with a
    budget of five (the root's, though the children set none). Whichever start comes sixth
    (workers start them in parallel) is refused: its calling step fails with NOE858, every
    execution ends and the tree never holds more than five."""
    for name, text in (("fan", FAN), ("middle", MIDDLE), ("leaf", LEAF)):
        (tmp_path / f"{name}.yaml").write_text(text)
    cluster.server()
    cluster.worker(concurrency=4)
    summary = cluster.submit(tmp_path / "fan.yaml", timeout=120)
    assert summary["status"] == "failed"
    store = PostgresStore(cluster.url)
    try:
        deadline = time.monotonic() + 60
        while True:  # the children the root's end stopped end a moment after it
            tree, ids = [], {summary["execution_id"]}
            for record in store.executions():  # parents before their children
                if record["parent_id"] in ids:
                    tree.append(record)
                    ids.add(record["execution_id"])
            if all(r["status"] != "running" for r in tree) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert len(tree) == 5
        assert {r["status"] for r in tree} <= {"completed", "failed", "cancelled"}
        errors = [
            e["payload"]["error"]
            for execution_id in ids  # the root's calls too
            for e in store.read(execution_id)
            if e["name"] in ("step.failed", "loop.iteration.failed")
            and e["payload"]["error"].get("child_error")
        ]
        refused = [e["child_error"] for e in errors if e["child_error"].get("budget")]
        assert [(e["budget"], e["code"]) for e in refused] == [("child_executions", "NOE858")]
    finally:
        store.close()


GROW = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: grow}
executor: {spec: {budgets: {stored_bytes: 1000000}}}
workload: {items: [1, 2, 3, 4, 5, 6, 7, 8]}
workflow:
  - step: start
    loop: {in: "{{ workload.items }}", iterator: x, spec: {mode: parallel, max_in_flight: 8}}
    tool: {kind: python, code: "result = 'g' * 300000"}
"""


def test_a_distributed_executions_results_stop_at_stored_bytes(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Eight results of 300 KB, a budget of 1 MB, two workers handing them in: at most three
    are logged, the others fail their iteration with NOE858 naming `stored_bytes`, and the
    execution ends."""
    (tmp_path / "grow.yaml").write_text(GROW)
    cluster.server()
    cluster.worker(concurrency=4)
    cluster.worker(concurrency=4)
    summary = cluster.submit(tmp_path / "grow.yaml", timeout=120)
    assert summary["status"] == "failed"
    events = cluster.events(summary["execution_id"])
    done = [e for e in events if e["name"] == "loop.iteration.done"]
    failed = [e["payload"]["error"] for e in events if e["name"] == "loop.iteration.failed"]
    assert 1 <= len(done) <= 3 and failed
    assert {(e["code"], e["budget"]) for e in failed} == {("NOE858", "stored_bytes")}
    assert "the results of this execution reached" in failed[0]["message"]
    assert "step `start`'s result: 300,002 bytes" in failed[0]["message"]
