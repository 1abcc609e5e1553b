"""Distributed mode does what embedded mode does, with real server and worker processes:
reference-first results (large results stored once, events carry references), and fail_fast cancelling a loop's other iterations.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noetlc.cli import vm_main as cli
from noetlc.compiler.pipeline import compile_file
from noetlc.expr.runtime import REF_KEY
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.ids import is_execution_id
from noetlc.runtime.logcheck import check_log
from noetlc.runtime.postgres.cluster_testing import Cluster
from noetlc.runtime.postgres.database import Database
from noetlc.runtime.postgres.event_store import PostgresStore
from noetlc.runtime.postgres.testing import run_sync
from noetlc.vm.protocol import folded_task


@pytest.fixture
def cluster(cluster_url: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(cluster_url, tmp_path)
    c.server()
    yield c
    c.stop()


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _comparable(summary: dict[str, Any]) -> dict[str, Any]:
    keys = ("status", "steps", "ctx", "result", "error")
    return {k: summary[k] for k in keys}


BIG_RESULT = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: big_result, path: tests/big_result}
executor:
  spec: {policy: {results: {reference_first: true}, limits: {max_payload_bytes: 200}}}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        result = {"rows": [{"id": i, "name": f"row-{i}"} for i in range(50)]}
    next:
      arcs:
        - step: count
          when: "{{ start.rows | length == 50 }}"
          args: {first: "{{ start.rows[0].name }}"}
        - step: wrong
          when: "{{ start.rows | length != 50 }}"
  - step: count
    tool:
      kind: python
      input: {n: "{{ start.rows | length }}", everything: "{{ start }}", first: "{{ args.first }}"}
      code: |
        result = {"n": n, "last": everything["rows"][-1]["name"], "first": first}
    next: again
  - step: again
    tool:
      kind: python
      input: {rows: "{{ start.rows }}"}
      code: |
        result = {"rows": rows, "again": True}
  - step: wrong
    tool: {kind: noop}
"""


def test_large_results_are_stored_by_reference(cluster: Cluster, tmp_path: Path) -> None:
    cluster.worker(4)
    playbook = _write(tmp_path / "big_result.yaml", BIG_RESULT)
    distributed = cluster.submit(playbook)
    embedded = run_embedded(compile_file(str(playbook)).payload)
    assert distributed["status"] == "completed", distributed
    assert _comparable(distributed) == _comparable(embedded)
    assert distributed["steps"]["count"]["result"] == {"n": 50, "last": "row-49", "first": "row-0"}
    assert "wrong" not in distributed["steps"] or distributed["steps"]["wrong"]["runs"] == 0
    events = cluster.events(distributed["execution_id"])
    done = {e["step"]: e for e in events if e["name"] == "step.done" and e["source"] == "worker"}
    for step in ("start", "again"):
        reference = done[step]["payload"]["result"][REF_KEY]
        assert set(reference) == {"store", "key", "size", "checksum"}
        assert reference["size"] > 200
    # the task's record is folded into step.done, its result stored once (by reference)
    task = folded_task(done["start"]["payload"])
    assert task is not None and task["task"]
    assert "result" not in done["start"]["payload"].get("outcome", {})
    assert task["outcome"]["result"] == done["start"]["payload"]["result"]
    assert not [e for e in events if e["name"] in ("task.done", "step.started")]
    # one task.started per action (the step runs now), none per later call
    started = Counter(e["step"] for e in events if e["name"] == "task.started")
    assert all(n == 1 for n in started.values()) and set(done) <= set(started)
    assert done["count"]["payload"]["result"]["n"] == 50  # small: kept in the event
    assert all(len(json.dumps(e["payload"])) < 2000 for e in events[1:])
    # the arc guard read the stored result: replay resolves it through the results table
    assert cli.main(["replay", distributed["execution_id"], "--db", cluster.url]) == 0


FAIL_FAST = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fail_fast, path: tests/fail_fast}
workload: {items: [0, 1, 2, 3, 4, 5], log: calls.log, release: release.flag}
workflow:
  - step: start
    loop:
      in: "{{ workload.items }}"
      iterator: n
      spec: {mode: parallel, max_in_flight: 6}
    tool:
      kind: python
      input: {n: "{{ iter.n }}", log: "{{ workload.log }}", release: "{{ workload.release }}"}
      code: |
        import os, time
        with open(log, "a") as fh:
            fh.write(f"start {n} {os.getpid()}\\n")
        if n == 0:
            raise ValueError("iteration 0 fails")
        # the others run until the cancel kills their process (or a release, which the
        # distributed run never gets): however slow the machine, they outlive the failure
        deadline = time.monotonic() + 120
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.05)
        with open(log, "a") as fh:
            fh.write(f"end {n}\\n")
        result = n
"""


async def _job_states(url: str, execution_id: str) -> dict[int, str]:
    """iteration -> status of the execution's jobs."""
    db = await Database.open(url, max_size=1)
    try:
        rows = await db.pool.fetch(
            "SELECT (payload::json->>'iteration')::int AS it, status FROM jobs"
            " WHERE execution_id = $1",
            execution_id,
        )
        return {r["it"]: r["status"] for r in rows}
    finally:
        await db.close()


def test_fail_fast_cancels_the_other_iterations(cluster: Cluster, tmp_path: Path) -> None:
    """Iteration 0 fails at once; the others run until the cancel kills their runner
    process. The worker runs python tasks in runner processes, so a cancelled iteration
    never reaches its end: the test waits for those processes to be gone (they would run
    120 s otherwise), not for an end they never write (the regression this test had)."""
    # two slots: iterations 0 and 1 are leased, 2..5 queued (the round that commits 0's
    # failure may already start 2)
    cluster.worker(2)
    playbook = _write(tmp_path / "fail_fast.yaml", FAIL_FAST)
    summary = cluster.submit(playbook)
    assert summary["status"] == "failed", summary
    released = tmp_path / "released.flag"
    released.write_text("")
    embedded = run_embedded(
        compile_file(str(playbook)).payload,
        {"log": str(tmp_path / "e.log"), "release": str(released)},
    )
    assert _comparable(summary) == _comparable(embedded)
    calls_log = tmp_path / "calls.log"

    def started() -> dict[str, int]:  # iteration -> the pid of the process that ran it
        lines = calls_log.read_text().split("\n")
        return {w[1]: int(w[2]) for w in (line.split() for line in lines) if w[:1] == ["start"]}

    def cancelled_ones_killed() -> bool:
        return all(not _alive(pid) for n, pid in started().items() if n != "0")

    _wait_for(cancelled_ones_killed)  # no release: only the cancel ends them
    assert "end " not in calls_log.read_text()
    # everything the worker will ever append is appended once it has stopped
    cluster.stop()
    execution_id = summary["execution_id"]
    events = cluster.events(execution_id)
    assert check_log(execution_id, events, "failed") == []
    failed_at = next(e["seq"] for e in events if e["name"] == "step.failed")
    late = [
        (e["name"], e["iteration"])
        for e in events
        if e["seq"] > failed_at and e["source"] == "worker" and e["name"] != "task.started"
    ]
    assert late == []  # no cancelled iteration reports a result after the cancel
    results = [e for e in events if e["name"].startswith("task.done") and e["iteration"] != 0]
    assert results == []
    calls = Counter(
        line.split()[1] for line in calls_log.read_text().split("\n") if line.startswith("start ")
    )
    assert all(n == 1 for n in calls.values()), calls  # nothing ran twice
    # 0 ran; 1 may be killed before its code starts (a runner starting under load), and
    # one queued iteration may race the cancel; the others never started
    assert calls["0"] == 1
    assert len(calls) <= 3, calls
    states = run_sync(_job_states(cluster.url, execution_id))
    assert states[0] == "done", states
    assert all(states[n] == "cancelled" for n in range(1, 6)), states


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


CHILD = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: double, path: tests/child/double}
workload: {n: 1}
workflow:
  - step: start
    tool:
      kind: python
      input: {n: "{{ workload.n }}"}
      code: |
        result = n * 2
"""

PARENT = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: parent, path: tests/parent}
workflow:
  - step: start
    tool:
      - name: call_child
        kind: playbook
        path: child/double
        args: {n: 21}
        wait: true
      - name: use
        kind: python
        input: {doubled: "{{ call_child }}"}
        code: |
          result = {"doubled": doubled}
    next: ids
  - step: ids
    tool:
      kind: python
      input: {me: "{{ execution_id }}", job: "{{ job.uuid }}", same: "{{ job.execution_id }}"}
      code: |
        result = {"bigint": 0 < int(me) < 2**63, "job_matches": me == job == same}
    next: broken
  - step: broken
    tool:
      kind: playbook
      path: child/missing
      wait: true
"""


def test_kind_playbook_runs_a_child_execution(cluster: Cluster, tmp_path: Path) -> None:
    cluster.worker(4)
    (tmp_path / "child").mkdir()
    _write(tmp_path / "child" / "double.yaml", CHILD)
    playbook = _write(tmp_path / "parent.yaml", PARENT)
    summary = cluster.submit(playbook)
    embedded = run_embedded(compile_file(str(playbook)).payload)
    assert _comparable(summary) == _comparable(embedded)
    assert summary["steps"]["start"]["result"] == {"doubled": 42}
    assert summary["status"] == "failed"  # `broken` names no playbook file
    events = cluster.events(summary["execution_id"])
    call = next(
        e for e in events if e["name"] == "task.done" and e["payload"]["task"] == "call_child"
    )
    child_id = call["payload"]["outcome"]["meta"]["child_execution_id"]
    store = PostgresStore(cluster.url)
    try:
        child = store.execution(child_id)
    finally:
        store.close()
    assert child is not None and child["status"] == "completed"
    assert child["parent_id"] == summary["execution_id"]
    assert child["summary"]["result"] == 42
    # NoETL's ids in distributed mode: snowflake integers for the parent and its child,
    # `job.*` filled on the worker
    assert is_execution_id(summary["execution_id"]) and is_execution_id(child_id)
    assert summary["steps"]["ids"]["result"] == {"bigint": True, "job_matches": True}


SLOW_CHILD = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: slow, path: tests/child/slow}
workload: {seconds: 3}
workflow:
  - step: start
    tool:
      kind: python
      input: {seconds: "{{ workload.seconds }}"}
      code: |
        import time
        time.sleep(seconds)
        result = seconds
"""

SLOW_PARENT = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: slow_parent, path: tests/slow_parent}
workload: {seconds: 3}
workflow:
  - step: start
    tool:
      kind: playbook
      path: child/slow
      args: {seconds: "{{ workload.seconds }}"}
      wait: true
"""


def _children(url: str, parent_id: str) -> list[dict[str, Any]]:
    store = PostgresStore(url)
    try:
        return [r for r in store.executions() if r["parent_id"] == parent_id]
    finally:
        store.close()


def _wait_for(condition: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_a_re_leased_parent_job_waits_for_the_same_child(cluster: Cluster, tmp_path: Path) -> None:
    cluster.worker(2)
    (tmp_path / "child").mkdir()
    _write(tmp_path / "child" / "slow.yaml", SLOW_CHILD)
    playbook = _write(tmp_path / "slow_parent.yaml", SLOW_PARENT)
    parent_id = cluster.submit(playbook, wait=False, timeout=30)["execution_id"]
    _wait_for(lambda: _children(cluster.url, parent_id))
    cluster.procs[-1].send_signal(signal.SIGKILL)  # the worker that waits on the child
    cluster.procs[-1].wait()
    cluster.worker(2)
    store = PostgresStore(cluster.url)
    try:
        _wait_for(lambda: (store.execution(parent_id) or {}).get("status") != "running")
        parent = store.execution(parent_id)
    finally:
        store.close()
    assert parent is not None and parent["status"] == "completed", parent
    children = _children(cluster.url, parent_id)
    assert len(children) == 1, children  # the new lease found the child the first one started
    assert children[0]["status"] == "completed"
    assert parent["summary"]["steps"]["start"]["result"] == 3


LONG_JOB = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: long_job, path: tests/long_job}
workload: {log: calls.log}
workflow:
  - step: start
    tool:
      kind: python
      input: {log: "{{ workload.log }}"}
      code: |
        import time
        with open(log, "a") as fh:
            fh.write("start\\n")
        time.sleep(5)
        result = 5
"""


def test_a_job_longer_than_the_lease_keeps_it(cluster: Cluster, tmp_path: Path) -> None:
    # ttl 2 s: the worker must heartbeat the 5 s job, or the lease expires and the job runs
    # again (or fails with LeaseExpired)
    cluster.worker(2)
    summary = cluster.submit(_write(tmp_path / "long_job.yaml", LONG_JOB))
    assert summary["status"] == "completed", summary
    assert (tmp_path / "calls.log").read_text() == "start\n"  # it ran once
    events = cluster.events(summary["execution_id"])
    assert not [e for e in events if e["name"] == "step.started"][1:]


WAITING_CHILD = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: wait_signal, path: tests/child/wait_signal}
workflow:
  - step: start
    eval_mode: on_event
    spec: {timeout: 20}
    tool: {kind: noop}
    next:
      arcs:
        - step: approved
          when: "{{ event.name != 'timer.fired' }}"
        - step: expired
          when: "{{ event.name == 'timer.fired' }}"
  - step: approved
    tool: {kind: noop}
  - step: expired
    tool: {kind: noop}
"""

WAITING_PARENT = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: parent_waits, path: tests/parent_waits}
workflow:
  - step: start
    tool:
      kind: playbook
      path: child/wait_signal
      wait: true
"""


def test_cancelling_the_parent_cancels_its_running_child(cluster: Cluster, tmp_path: Path) -> None:
    cluster.worker(2)
    (tmp_path / "child").mkdir()
    _write(tmp_path / "child" / "wait_signal.yaml", WAITING_CHILD)
    playbook = _write(tmp_path / "parent_waits.yaml", WAITING_PARENT)
    parent_id = cluster.submit(playbook, wait=False, timeout=30)["execution_id"]
    _wait_for(lambda: _children(cluster.url, parent_id))
    assert cli.main(["cancel", parent_id, "--db", cluster.url]) == 0
    _wait_for(lambda: all(r["status"] != "running" for r in _children(cluster.url, parent_id)))
    [child] = _children(cluster.url, parent_id)
    assert child["status"] == "cancelled", child  # not ended by its 20 s timer
    store = PostgresStore(cluster.url)
    try:
        parent = store.execution(parent_id)
    finally:
        store.close()
    assert parent is not None and parent["status"] == "cancelled", parent


MIDDLE_CHILD = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: middle, path: tests/child/middle}
workflow:
  - step: start
    tool:
      kind: playbook
      path: slow
      args: {seconds: 1}
      wait: true
"""


def test_one_slot_serves_nested_children(cluster: Cluster, tmp_path: Path) -> None:
    # a job waiting on its child gives its slot back: one slot runs parent, child, grandchild
    cluster.worker(1)
    (tmp_path / "child").mkdir()
    _write(tmp_path / "child" / "slow.yaml", SLOW_CHILD)
    _write(tmp_path / "child" / "middle.yaml", MIDDLE_CHILD)
    playbook = _write(tmp_path / "top.yaml", SLOW_PARENT.replace("child/slow", "child/middle"))
    summary = cluster.submit(playbook, timeout=40)
    assert summary["status"] == "completed", summary
    assert summary["steps"]["start"]["result"] == 1
