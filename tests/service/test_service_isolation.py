"""Task code cannot read the service's secrets: a python task run by `noetl-vm serve`
(embedded) or by a `noetl-vm worker` (distributed) looks at its own environment, its own
command line and its parent's (`/proc/<ppid>/environ`, `/proc/<ppid>/cmdline`) and finds
neither the credential key nor the API token; a task over its memory limit fails alone and
the service runs the next one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from noetlc.runtime.credentials import new_key
from noetlc.service.serving import Served
from noetlc.service.testing import TOKEN, b64

pytestmark = pytest.mark.slow

SNOOP = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: snoop, path: tests/snoop}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        import os
        def read(path):
            try:
                with open(path, "rb") as f:
                    return f.read().decode("utf-8", "replace")
            except OSError as exc:
                return "unreadable: " + type(exc).__name__
        parent = os.getppid()
        result = {
            "pid": os.getpid(),
            "environ": dict(os.environ),
            "cmdline": read("/proc/self/cmdline"),
            "parent_environ": read(f"/proc/{parent}/environ"),
            "parent_cmdline": read(f"/proc/{parent}/cmdline"),
        }
"""

GREEDY = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: greedy, path: tests/greedy}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        block = bytearray(600 * 1024 * 1024)
        result = len(block)
"""

SMALL = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: small, path: tests/small}
workflow:
  - step: start
    tool: {kind: python, code: "result = 6 * 7"}
"""


def run(api: httpx.Client, text: str, path: str) -> dict[str, object]:
    assert api.post("/api/catalog/register", json={"content": b64(text)}).status_code == 200
    execution_id = api.post("/api/execute", json={"path": path}).json()["execution_id"]
    for _ in range(600):
        status = api.get(f"/api/executions/{execution_id}/status").json()
        if status.get("completed"):
            break
        __import__("time").sleep(0.1)
    detail = api.get(f"/api/executions/{execution_id}").json()
    summary: dict[str, object] = detail["summary"] or {}
    return summary


def leaks(result: dict[str, object], secrets: list[str]) -> list[str]:
    text = json.dumps(result)
    return [s for s in secrets if s in text]


def served_for(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Served, str]]:
    """The service and its credential key (given by the environment, as an operator would)."""
    key = new_key()
    extra = ["--task-memory-mb", "300"]
    if mode == "embedded":
        served = Served(f"sqlite:///{tmp_path / 'noetl.db'}", tmp_path, key, TOKEN, extra)
        try:
            yield served, key
        finally:
            served.stop()
        return
    from noetlc.runtime.postgres.cluster_testing import Cluster
    from noetlc.runtime.postgres.testing import schema_or_skip

    monkeypatch.setenv("NOETL_CREDENTIAL_KEY", key)  # the worker resolves credentials with it
    monkeypatch.setenv("NOETL_API_TOKEN", TOKEN)  # an operator's shell exports both
    for url in schema_or_skip():
        cluster = Cluster(url, tmp_path)
        cluster.server(2.0, 0.2)
        cluster.worker(2, 2.0, "--task-memory-mb", "300")
        served = Served(url, tmp_path, key, TOKEN)
        try:
            yield served, key
        finally:
            served.stop()
            cluster.stop()


@pytest.mark.parametrize("mode", ["embedded", "distributed"])
def test_task_code_finds_no_key_and_no_token(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for served, key in served_for(mode, tmp_path, monkeypatch):
        # the serve command line holds neither (they come by environment)
        assert TOKEN not in " ".join(map(str, served.proc.args))
        with httpx.Client(
            base_url=served.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        ) as api:
            summary = run(api, SNOOP, "tests/snoop")
            assert summary["status"] == "completed", summary
            result = summary["steps"]["start"]["result"]  # type: ignore[index]
            assert result["pid"] != served.proc.pid
            assert "NOETL_CREDENTIAL_KEY" not in result["environ"]
            assert "NOETL_API_TOKEN" not in result["environ"]
            assert "serve" not in result["cmdline"] and "--token" not in result["cmdline"]
            # the parent (serve, or the worker) had both in its environment: wiped from /proc
            assert "unreadable" not in result["parent_environ"], result["parent_environ"]
            assert leaks(result, [TOKEN, key]) == [], mode


@pytest.mark.parametrize("mode", ["embedded", "distributed"])
def test_a_task_over_its_memory_limit_fails_alone(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for served, _key in served_for(mode, tmp_path, monkeypatch):
        with httpx.Client(
            base_url=served.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        ) as api:
            greedy = run(api, GREEDY, "tests/greedy")
            assert greedy["status"] == "failed", greedy
            assert "MemoryError" in json.dumps(greedy["error"]), greedy
            assert "300 MB" in greedy["error"]["message"], greedy  # type: ignore[index]
            small = run(api, SMALL, "tests/small")
            assert small["status"] == "completed", small
            assert small["steps"]["start"]["result"] == 42  # type: ignore[index]
            assert api.get("/api/health").status_code == 200
