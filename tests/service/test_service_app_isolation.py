"""`create_app` used directly (not through `noetl-vm serve`) still keeps task code away from
the service: the service object holds the process isolation mode while it is open and puts
back the mode that was before when closed; `Settings(isolate_tasks=False)` keeps tasks in
the calling process (an embedding that trusts its playbooks)."""

from __future__ import annotations

import os

import pytest

from noetlc.service.testing import asgi_client, register, settings_for, wait_done
from noetlc.stdlib_tools import isolation


@pytest.fixture(autouse=True)
def _inline_before() -> object:
    """Each test starts from this process's default mode (inline), whatever a test before it
    in the same process configured, and puts that mode back after."""
    before = isolation.policy()
    isolation.configure("inline")
    yield
    isolation.configure(before.mode, before.limits)


PROBE = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: probe, path: tests/probe}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        import os
        result = {"pid": os.getpid(), "key": "NOETL_CREDENTIAL_KEY" in os.environ}
"""


async def _probe(db_url: str, **extra: object) -> dict[str, object]:
    async with asgi_client(settings_for(db_url, **extra)) as api:
        await register(api, PROBE)
        started = await api.post("/api/execute", json={"path": "tests/probe"})
        execution_id = started.json()["execution_id"]
        status = await wait_done(api, execution_id)
        assert status.get("failed") is not True, status
        mode = isolation.policy().mode
        detail = (await api.get(f"/api/executions/{execution_id}")).json()
    results = [
        e["result"]
        for e in detail["events"]
        if isinstance(e.get("result"), dict) and "pid" in e["result"]
    ]
    assert results, detail["events"]
    return {"mode": mode, **results[-1]}


async def test_create_app_runs_tasks_in_runner_processes(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOETL_CREDENTIAL_KEY", "the-master-key-value")
    assert isolation.policy().mode == "inline"
    seen = await _probe(db_url)
    assert seen["mode"] == "process"
    assert seen["pid"] != os.getpid() and seen["key"] is False
    assert isolation.policy().mode == "inline"  # put back once the service is closed


async def test_an_embedding_can_keep_tasks_in_process(db_url: str) -> None:
    seen = await _probe(db_url, isolate_tasks=False)
    assert seen["mode"] == "inline" and seen["pid"] == os.getpid()


def test_holds_nest_and_keep_a_configured_mode() -> None:
    isolation.hold()
    isolation.hold()
    isolation.release()
    assert isolation.policy().mode == "process"  # one service still open
    isolation.release()
    assert isolation.policy().mode == "inline"
    limits = isolation.TaskLimits(open_files=77)
    isolation.configure("process", limits, spare=0)  # as `serve` does, with its limits
    try:
        isolation.hold()
        isolation.release()
        assert isolation.policy().mode == "process" and isolation.policy().limits == limits
    finally:
        isolation.pool().close()
        isolation.configure("inline")
