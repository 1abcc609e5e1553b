"""The live event stream (server-sent events), per-execution variables, and rendering a
template in an execution's scope."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from noetlc.runtime.credentials import new_key
from noetlc.service.serving import Served
from noetlc.service.testing import TOKEN, register, wait_done

REPO = Path(__file__).resolve().parents[2]
HELLO = (REPO / "examples" / "hello.yaml").read_text()
LISTENER = (REPO / "tests" / "vm" / "playbooks" / "listener.yaml").read_text()


def parse_sse(text: str) -> list[dict[str, str]]:
    out = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if line.startswith(":") or ":" not in line:
                continue
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        if fields:
            out.append(fields)
    return out


@pytest.fixture
async def served_api(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A real `noetl-vm serve` process: the ASGI transport buffers whole responses, a live
    stream needs a socket."""
    served = Served(f"sqlite:///{tmp_path / 'noetl.db'}", tmp_path, new_key(), token=TOKEN)
    try:
        async with httpx.AsyncClient(
            base_url=served.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        ) as client:
            yield client
    finally:
        served.stop()


async def test_the_event_stream_follows_a_run_to_its_end(served_api: httpx.AsyncClient) -> None:
    api = served_api
    await register(api, LISTENER)
    execution_id = (await api.post("/api/execute", json={"path": "tests/listener"})).json()[
        "execution_id"
    ]
    seen: list[dict[str, str]] = []
    async with api.stream(
        "GET", f"/api/executions/{execution_id}/events", headers={"Accept": "text/event-stream"}
    ) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream")
        buffer = ""
        signalled = False
        async for chunk in reply.aiter_text():
            buffer += chunk
            seen = parse_sse(buffer)
            names = [e.get("event") for e in seen]
            if not signalled and "step.started" in names:
                signalled = True  # the listener waits: signal it while the stream is open
                sent = await api.post(
                    f"/api/executions/{execution_id}/signal",
                    json={"name": "approve", "data": {"user": "sse"}},
                )
                assert sent.status_code == 200
    names = [e.get("event") for e in seen]
    assert names[0] == "playbook.execution.requested" and names[-1] == "end"
    assert json.loads(seen[-1]["data"]) == {"status": "COMPLETED"}
    ids = [int(e["id"]) for e in seen if "id" in e]
    assert ids == sorted(ids) and len(ids) == len(set(ids))
    done = [json.loads(e["data"]) for e in seen if e.get("event") == "step.done"]
    assert {d["node_name"] for d in done} == {"start", "approved"}
    # a reconnect with Last-Event-ID gets only the rest
    again = await api.get(
        f"/api/executions/{execution_id}/events?stream=true",
        headers={"Last-Event-ID": str(ids[-3])},
    )
    rest = [e for e in parse_sse(again.text) if "id" in e]
    assert [int(e["id"]) for e in rest] == ids[-2:]


async def test_vars(api: httpx.AsyncClient) -> None:
    base = "/api/vars/42"
    assert (await api.get(base)).json() == {"execution_id": 42, "variables": {}, "count": 0}
    put = await api.post(base, json={"variables": {"x": 1, "y": {"a": [1]}}, "source_step": "s"})
    assert put.json() == {"execution_id": 42, "variables_set": 2, "var_names": ["x", "y"]}
    one = (await api.get(f"{base}/y")).json()
    assert one["value"] == {"a": [1]} and one["access_count"] == 1 and one["var_name"] == "y"
    assert (await api.get(f"{base}/y")).json()["access_count"] == 2
    listed = (await api.get(base)).json()
    assert listed["count"] == 2 and listed["variables"]["x"]["type"] == "user_defined"
    assert (await api.delete(f"{base}/x")).json() == {
        "execution_id": 42,
        "var_name": "x",
        "deleted": True,
    }
    assert (await api.delete(base)).json() == {"execution_id": 42, "deleted_count": 1}
    assert (await api.get(f"{base}/x")).status_code == 404
    assert (await api.get("/api/vars/abc")).status_code == 422
    assert (await api.post(base, json={"variables": {}})).status_code == 422  # minProperties 1
    assert (
        await api.post(base, json={"variables": {"a": 1}, "var_type": "odd"})
    ).status_code == 422


async def test_render_in_an_execution_scope(api: httpx.AsyncClient) -> None:
    await register(api, HELLO)
    execution_id = (
        await api.post("/api/execute", json={"path": "examples/hello", "workload": {"name": "r"}})
    ).json()["execution_id"]
    await wait_done(api, execution_id)
    await api.post(f"/api/vars/{execution_id}", json={"variables": {"v": 5}})
    reply = await api.post(
        "/api/context/render",
        json={
            "execution_id": int(execution_id),
            "template": {
                "who": "{{ workload.name }}",
                "n": "{{ vars.v + extra }}",
                "s": ["{{ shout.shout }}"],
            },
            "extra_context": {"extra": 2},
        },
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["rendered"] == {"who": "r", "n": 7, "s": ["HELLO R"]}
    assert {"workload", "start", "shout", "vars", "extra"} <= set(body["context_keys"])
    # the schema states both as required and execution_id as digits: 422 NOE872 otherwise
    missing = await api.post("/api/context/render", json={"template": "x"})
    assert missing.status_code == 422 and "execution_id" in str(missing.json()["detail"])
    no_template = await api.post("/api/context/render", json={"execution_id": execution_id})
    assert no_template.status_code == 422 and "template" in str(no_template.json()["detail"])
    not_int = await api.post("/api/context/render", json={"execution_id": "x", "template": 1})
    assert not_int.status_code == 422 and not_int.json()["code"] == "NOE872"
    broken = await api.post(
        "/api/context/render", json={"execution_id": execution_id, "template": "{{ 1 / 0 }}"}
    )
    assert broken.status_code == 400 and broken.json()["code"] == "NOE310"
    lenient = await api.post(
        "/api/context/render",
        json={"execution_id": execution_id, "template": "{{ 1 / 0 }}", "strict": False},
    )
    assert lenient.json()["rendered"] == "{{ 1 / 0 }}"


async def test_a_restarted_service_finishes_what_it_left_running(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'noetl.db'}"
    key = new_key()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    first = Served(db, tmp_path, key, token=TOKEN)
    try:
        async with httpx.AsyncClient(base_url=first.url, headers=headers, timeout=30) as api:
            await register(api, LISTENER)
            execution_id = (await api.post("/api/execute", json={"path": "tests/listener"})).json()[
                "execution_id"
            ]
            for _ in range(200):
                status = (await api.get(f"/api/executions/{execution_id}/status")).json()
                if status["current_step"] == "start":
                    break
                await asyncio.sleep(0.02)
    finally:
        first.proc.kill()  # no shutdown: the execution stays `running` in the store
        first.proc.wait()
    second = Served(db, tmp_path, key, token=TOKEN)
    try:
        async with httpx.AsyncClient(base_url=second.url, headers=headers, timeout=30) as api:
            assert (await api.get(f"/api/executions/{execution_id}/status")).json()[
                "status"
            ] == "RUNNING"
            sent = await api.post(
                f"/api/executions/{execution_id}/signal",
                json={"name": "approve", "data": {"user": "after-restart"}},
            )
            assert sent.status_code == 200
            await wait_done(api, execution_id)
            detail = (await api.get(f"/api/executions/{execution_id}")).json()
            assert detail["status"] == "COMPLETED" and detail["result"] == {
                "approved_by": "after-restart"
            }
    finally:
        second.stop()
