"""Distributed mode: a worker records when it starts each action (`task.started`, committed
before the tool runs, naming the worker) and stores what its tasks print in `task_logs`,
redacted, never in its own output; the API's status and logs read both from PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from noetlc.runtime.postgres.cluster_testing import Cluster
from noetlc.runtime.postgres.event_store import PostgresStore
from noetlc.service.progress import StepProgress

PLAYBOOK = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: pg_logs, path: t/pg_logs}
keychain:
  - {name: api_token, kind: secret}
workflow:
  - step: start
    tool:
      kind: python
      input: {tok: "{{ keychain.api_token }}"}
      code: |
        print(f"worker prints {tok}")
        result = 1
    next: each
  - step: each
    loop: {in: [1, 2], iterator: n}
    tool: {kind: shell, command: "echo shell says {{ iter.n }}"}
    next: boom
  - step: boom
    tool:
      kind: python
      code: |
        print("before the failure")
        raise ValueError("distributed failure")
"""


def test_a_worker_records_starts_and_stores_task_output(cluster: Cluster, tmp_path: Path) -> None:
    playbook = tmp_path / "pg_logs.yaml"
    playbook.write_text(PLAYBOOK)
    keychain = tmp_path / "keychain.yaml"
    keychain.write_text("api_token: dist-s3cr3t\n")
    cluster.server()
    worker = cluster.worker(4, 2.0, "--keychain", str(keychain))
    summary = cluster.submit(playbook)
    assert summary["status"] == "failed", summary
    raising = PLAYBOOK.splitlines().index('        raise ValueError("distributed failure")') + 1
    assert summary["error"]["yaml"]["line"] == raising
    execution_id = summary["execution_id"]
    store = PostgresStore(cluster.url)
    try:
        events = store.read(execution_id)
        rows = store.read_logs(execution_id)
    finally:
        store.close()
    started = [e for e in events if e["name"] == "task.started"]
    assert sorted((e["step"], e["iteration"]) for e in started) == [
        ("boom", None),
        ("each", 0),
        ("each", 1),
        ("start", None),
    ]
    assert all(e["payload"]["worker"].startswith("worker") for e in started)
    text = "".join(r["text"] for r in rows)
    assert "worker prints ***" in text and "dist-s3cr3t" not in text
    shell = sorted(r["text"] for r in rows if r["step"] == "each" and r["stream"] == "stdout")
    assert shell == ["shell says 1\n", "shell says 2\n"]
    assert "before the failure\n" in text
    progress = StepProgress()
    progress.feed(events)
    assert progress.view(True, False)["steps"]["boom"]["state"] == "failed"
    assert progress.loops["each"]["done"] == 2
    cluster.stop()
    out, err = cluster.output(worker)
    assert "worker prints" not in out + err and "before the failure" not in out + err
