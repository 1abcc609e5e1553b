"""SIGTERM stops a worker within its grace period even while a task is stuck in in-process
python code that never returns (real processes on PostgreSQL; skipped without one)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from noetlc.runtime.postgres.cluster_testing import Cluster
from noetlc.runtime.postgres.testing import schema_or_skip

STUCK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: stuck, path: t/stuck}
workload: {started: ""}
workflow:
  - step: start
    tool:
      kind: python
      input: {started: "{{ workload.started }}"}
      code: |
        open(started, "w").write("1")
        while True:
            pass
"""


@pytest.fixture(scope="module")
def cluster_url() -> Iterator[str]:
    yield from schema_or_skip()


@pytest.fixture
def cluster(cluster_url: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(cluster_url, tmp_path)
    yield c
    c.stop()


def test_sigterm_stops_a_worker_whose_task_never_returns(cluster: Cluster, tmp_path: Path) -> None:
    playbook = tmp_path / "stuck.yaml"
    playbook.write_text(STUCK)
    started = tmp_path / "started"
    cluster.server()
    worker = cluster.worker(concurrency=1)  # --grace 1
    cluster.submit(playbook, f"started={started}", wait=False)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert time.monotonic() < deadline, "the task never started"
        time.sleep(0.1)
    worker.send_signal(signal.SIGTERM)
    try:
        status = worker.wait(timeout=30)  # grace 1 s; it hung forever before
    except subprocess.TimeoutExpired:
        worker.kill()
        pytest.fail("the worker did not exit after SIGTERM")
    assert status == 0
