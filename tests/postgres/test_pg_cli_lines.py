"""Distributed mode tells what it does: server and worker lines per execution and at
shutdown, and a `submit --wait` that gives up names the execution (NOE832)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from noetlc.runtime.postgres.cluster_testing import Cluster, run_vm
from noetlc.runtime.postgres.testing import schema_or_skip

pytestmark = pytest.mark.postgres
PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: lines}
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    next: second
  - step: second
    tool: {kind: noop}
"""


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    yield from schema_or_skip()


def test_server_and_worker_print_a_line_per_execution_and_at_shutdown(
    url: str, tmp_path: Path
) -> None:
    playbook = tmp_path / "lines.yaml"
    playbook.write_text(PLAYBOOK)
    cluster = Cluster(url, tmp_path)
    server, worker = cluster.server(), cluster.worker(concurrency=1)
    try:
        summary = cluster.submit(playbook)
    finally:
        cluster.stop()
    assert summary["status"] == "completed", summary
    execution = summary["execution_id"]
    # output goes to files, not pipes: a pipe nobody reads until the end fills after ~64 KiB of
    # log lines and blocks the server (a long benchmark run stalled that way)
    assert server.stderr is None and worker.stderr is None
    _, server_err = cluster.output(server)
    _, worker_err = cluster.output(worker)
    assert f"execution {execution} (lines) owned" in server_err, server_err
    assert f"execution {execution} completed" in server_err, server_err
    assert "stopped after" in server_err and "execution(s) ended" in server_err
    assert f"execution {execution}: " in worker_err and "job(s) done" in worker_err, worker_err
    assert "stopped after" in worker_err


def test_submit_wait_timeout_is_noe832_and_resume_leaves_it_to_the_servers(
    url: str, tmp_path: Path
) -> None:
    playbook = tmp_path / "lines.yaml"
    playbook.write_text(PLAYBOOK)
    # no server runs on this schema now: the wait gives up
    proc = run_vm("submit", str(playbook), "--db", url, "--wait", "--timeout", "0.5", cwd=tmp_path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "error[NOE832]: execution " in err and "did not end within 0.5 s" in err
    # the execution waits for a server; `resume` leaves it to the servers
    execution = err.split("error[NOE832]: execution ", 1)[1].split()[0]
    # a prefix: snowflake ids of one schema share their leading (time) digits, so a long one
    resumed = run_vm("resume", execution[:-3], "--db", url, cwd=tmp_path)
    _, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 4, err
    assert f"error[NOE831]: execution {execution} runs in distributed mode" in err
