"""Fencing with real processes: a worker SIGSTOPped past its lease comes back to find its job
run by another worker; its stale completion is refused whole (no event of it is logged) and
the live holder's result is the one the execution uses."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noetlc.runtime.postgres.cluster_testing import Cluster
from noetlc.runtime.postgres.cluster_testing import run_vm as _vm
from noetlc.runtime.postgres.store import PostgresStore
from noetlc.runtime.postgres.testing import schema_or_skip

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {{name: fenced, path: tests/fenced}}
workload: {{log: {log!r}}}
workflow:
  - step: start
    tool:
      kind: python
      input: {{log: "{{{{ workload.log }}}}"}}
      code: |
        import time, uuid
        token = uuid.uuid4().hex
        with open(log, "a") as fh:
            fh.write(token + "\\n")
        time.sleep(1.0)
        result = token
    next: [{{step: end}}]
  - step: end
    tool: {{kind: noop}}
"""


@pytest.fixture(scope="module")
def cluster_url() -> Iterator[str]:
    yield from schema_or_skip()


@pytest.fixture
def cluster(cluster_url: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(cluster_url, tmp_path)
    yield c
    c.stop()


def _wait_for(predicate: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_a_worker_stopped_past_its_lease_has_its_completion_refused(
    cluster: Cluster, tmp_path: Path
) -> None:
    log = tmp_path / "calls.log"
    playbook = tmp_path / "fenced.yaml"
    playbook.write_text(PLAYBOOK.format(log=str(log)))
    cluster.server(ttl=2.0)
    paused = cluster.worker(1, 1.0)
    execution_id = cluster.submit(playbook, wait=False)["execution_id"]
    _wait_for(lambda: len(_lines(log)) == 1)
    os.kill(paused.pid, signal.SIGSTOP)  # mid-tool: its lease (ttl 1 s) expires meanwhile
    try:
        cluster.worker(1, 5.0)  # takes the job over once the server reaps the expired lease
        store = PostgresStore(cluster.url)
        try:
            _wait_for(lambda: store.execution(execution_id)["status"] != "running", 90)  # type: ignore[index]
        finally:
            store.close()
    finally:
        os.kill(paused.pid, signal.SIGCONT)
    stale, live = _lines(log)
    # the paused worker comes back with its result: it must be refused, then it stops
    time.sleep(1.5)
    paused.send_signal(signal.SIGTERM)
    _, err = paused.communicate(timeout=30)
    said = re.search(r"(\d+) completion\(s\) refused, (\d+) lease\(s\) found lost", err)
    assert said and int(said[1]) + int(said[2]) >= 1, err
    events = cluster.events(execution_id)
    record = PostgresStore(cluster.url)
    try:
        execution = record.execution(execution_id)
    finally:
        record.close()
    assert execution is not None and execution["status"] == "completed"
    assert execution["summary"]["steps"]["start"]["result"] == live
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert not [e for e in events if stale in repr(e["payload"])], "the stale result was logged"
    assert [e["payload"].get("result") for e in events if e["name"] == "step.done"][:1] == [live]
    replay = _vm("replay", execution_id, "--db", cluster.url, "--json")
    out, err = replay.communicate(timeout=60)
    assert replay.returncode == 0, out + err
