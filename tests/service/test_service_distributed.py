"""The API over PostgreSQL beside real `noetl-vm server` and `worker` processes: executions
are offered to the cluster; a `kind: playbook` task of a distributed run finds its child in
the catalog; two API instances share one catalog (versions never collide); credentials reach
a worker's keychain."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from noetlc.runtime.credentials import KEY_ENV, new_key, parse_key
from noetlc.runtime.postgres.cluster_testing import Cluster
from noetlc.runtime.postgres.testing import dsn_or_skip, temporary_schema
from noetlc.service.testing import asgi_client, register, settings_for, wait_done

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
HELLO = (REPO / "examples" / "hello.yaml").read_text()
CHILD = (REPO / "tests" / "vm" / "playbooks" / "child" / "double.yaml").read_text()
PARENT = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: parent_catalog, path: t/parent}
workflow:
  - step: start
    tool:
      - name: call_child
        kind: playbook
        path: tests/child/double
        args: {n: 21}
        wait: true
"""


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    dsn_or_skip()
    with temporary_schema("noetl_service") as url:
        yield url


KEY = new_key()
USES_SECRET = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: uses_secret, path: t/uses_secret}
keychain:
  - {name: api_key, kind: bearer}
workflow:
  - step: start
    tool:
      kind: python
      input: {key: "{{ keychain.api_key.token }}"}
      code: |
        result = {"length": len(key), "echo": "key=" + key}
"""


@pytest.fixture(scope="module")
def cluster(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = Cluster(pg_url, tmp_path_factory.mktemp("cluster"))
    before = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = KEY  # the worker resolves keychain entries from the store
    try:
        running.server()
        running.worker()
    finally:
        if before is None:
            os.environ.pop(KEY_ENV)
        else:
            os.environ[KEY_ENV] = before
    try:
        yield running
    finally:
        running.stop()


async def test_execute_on_the_cluster_with_a_catalog_child(pg_url: str, cluster: Cluster) -> None:
    async with asgi_client(settings_for(pg_url)) as api:
        await register(api, HELLO)
        await register(api, CHILD)
        await register(api, PARENT)
        hello = (await api.post("/api/execute", json={"path": "examples/hello"})).json()
        status = await wait_done(api, hello["execution_id"], timeout=60)
        assert status["status"] == "COMPLETED" and status["completed_steps"] == ["start", "shout"]
        started = (await api.post("/api/execute", json={"path": "t/parent"})).json()
        await wait_done(api, started["execution_id"], timeout=60)
        detail = (await api.get(f"/api/executions/{started['execution_id']}")).json()
        assert detail["status"] == "COMPLETED", detail
        assert detail["result"] == 42
        listed = (await api.get("/api/executions?path=t/parent")).json()
        assert [e["execution_id"] for e in listed] == [started["execution_id"]]


PARENT_NOETL = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: parent_noetl, path: t/parent_noetl}
workflow:
  - step: start
    tool:
      kind: playbook
      path: tests/child/double
      args: {n: 4}
    next: [{step: waited}]
  - step: waited
    tool:
      kind: playbook
      path: tests/child/double
      args: {n: 5}
      return_step: start
"""


async def test_a_child_is_started_or_waited_for_as_noetl_does(
    pg_url: str, cluster: Cluster
) -> None:
    async with asgi_client(settings_for(pg_url)) as api:
        await register(api, CHILD)
        await register(api, PARENT_NOETL)
        started = (await api.post("/api/execute", json={"path": "t/parent_noetl"})).json()
        await wait_done(api, started["execution_id"], timeout=60)
        reply = await api.get(f"/api/executions/{started['execution_id']}?page_size=500")
        detail = reply.json()
        assert detail["status"] == "COMPLETED", detail
        # the first call only started its child, which runs on by itself: it ends too
        done = [
            e["result"]
            for e in detail["events"]
            if e["event_type"] == "step.done" and e["node_name"] == "start"
        ]
        assert done, [(e["event_type"], e["node_name"]) for e in detail["events"]]
        first = done[0]
        assert (first["status"], first["data"]["status"]) == ("success", "started")
        status = await wait_done(api, first["execution_id"], timeout=60)
        assert status["status"] == "COMPLETED"
        # with `return_step`: the status view of a child that completed
        view = detail["result"]
        assert (view["completed"], view["failed"], view["result"]) == (True, False, 10)


async def test_a_worker_resolves_credentials_from_the_store(pg_url: str, cluster: Cluster) -> None:
    async with asgi_client(settings_for(pg_url, credential_key=parse_key(KEY, "test"))) as api:
        secret = "tok-0123456789"
        await api.post(
            "/api/credentials",
            json={"name": "api_key", "type": "bearer", "data": {"token": secret}},
        )
        await register(api, USES_SECRET)
        started = (await api.post("/api/execute", json={"path": "t/uses_secret"})).json()
        status = await wait_done(api, started["execution_id"], timeout=60)
        detail = await api.get(f"/api/executions/{started['execution_id']}?page_size=500")
        assert status["status"] == "COMPLETED", detail.text
        assert detail.json()["result"]["length"] == len(secret)
        assert secret not in detail.text
        reads = (await api.get("/api/credentials/api_key/reads")).json()["reads"]
        assert [r["execution_id"] for r in reads] == [started["execution_id"]]
        assert reads[0]["who"].startswith("keychain:worker")


async def test_two_api_instances_share_the_catalog(pg_url: str) -> None:
    async with asgi_client(settings_for(pg_url)) as one, asgi_client(settings_for(pg_url)) as two:
        texts = [HELLO.replace("name: world", f"name: v{i}") for i in range(6)]
        replies = await asyncio.gather(
            *(register(one if i % 2 else two, t) for i, t in enumerate(texts))
        )
        versions = sorted(r["version"] for r in replies)
        assert versions == sorted(set(versions)) and len(versions) == 6
        seen = (await one.post("/api/catalog/list", json={"path": "examples/hello"})).json()
        assert len(seen["entries"]) >= 6
        assert isinstance(two, httpx.AsyncClient)
