"""The HTTP API through the ASGI app: catalog, execute, status, detail, events, cancel, errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from noetlc.service.testing import TOKEN, asgi_client, b64, register, settings_for, wait_done

REPO = Path(__file__).resolve().parents[2]
HELLO = (REPO / "examples" / "hello.yaml").read_text(encoding="utf-8")
PLAYBOOKS = REPO / "tests" / "vm" / "playbooks"


async def test_health_needs_no_token_and_everything_else_does(api: httpx.AsyncClient) -> None:
    assert (await api.get("/api/health", headers={"Authorization": ""})).json() == {"status": "ok"}
    assert (await api.get("/health", headers={"Authorization": ""})).status_code == 200
    reply = await api.get("/api/executions", headers={"Authorization": "Bearer wrong"})
    assert reply.status_code == 401 and reply.json()["code"] == "NOE870"
    reply = await api.get("/api/executions", headers={"Authorization": ""})
    assert reply.status_code == 401
    # the NoETL client also sends the token as x-session-token
    reply = await api.get(
        "/api/executions", headers={"Authorization": "", "x-session-token": TOKEN}
    )
    assert reply.status_code == 200


async def test_register_versions_by_content(api: httpx.AsyncClient) -> None:
    first = await register(api, HELLO)
    assert first["path"] == "examples/hello" and first["version"] == 1
    assert first["kind"] == "playbook" and first["catalog_id"].isdigit()
    again = await register(api, HELLO)
    assert again["version"] == 1 and again["catalog_id"] == first["catalog_id"]
    changed = await register(api, HELLO.replace("name: world", "name: there"))
    assert changed["version"] == 2
    # plain text works as well as base64
    plain = await api.post("/api/catalog/register", json={"content": HELLO})
    assert plain.json()["version"] == 1
    listed = (await api.post("/api/catalog/list", json={"resource_type": "Playbook"})).json()
    assert [e["version"] for e in listed["entries"]] == [2, 1]
    latest = (await api.post("/api/catalog/resource", json={"path": "examples/hello"})).json()
    assert latest["version"] == 2 and "name: there" in latest["content"]
    one = await api.post("/api/catalog/resource", json={"path": "examples/hello", "version": 1})
    assert one.json()["catalog_id"] == first["catalog_id"]
    by_id = await api.post("/api/catalog/resource", json={"catalog_id": int(first["catalog_id"])})
    assert by_id.json()["version"] == 1
    missing = await api.post("/api/catalog/resource", json={"path": "nope"})
    assert missing.status_code == 404 and missing.json() == {
        "detail": "Catalog entry not found",
        "code": "NOE871",
        "hint": "`noetl-vm catalog list` shows the paths",
    }
    assert (await api.post("/api/catalog/resource", json={})).status_code == 422


async def test_an_invalid_playbook_is_refused_with_located_diagnostics(
    api: httpx.AsyncClient,
) -> None:
    bad = "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: bad}\nworkflow:\n  - step: start\n    next: nowhere\n"
    reply = await api.post("/api/catalog/register", json={"content": b64(bad)})
    assert reply.status_code == 422
    body = reply.json()
    assert body["code"] == "NOE873" and "is not a valid playbook" in body["detail"]
    located = [(d["code"], d["line"], d["column"]) for d in body["diagnostics"]]
    assert ("NOE206", 5, 5) in located
    not_yaml = await api.post("/api/catalog/register", json={"content": "a: [1,\n"})
    assert not_yaml.status_code == 422 and not_yaml.json()["code"] == "NOE873"
    secret = "kind: Credential\nname: pg\ndata: {password: x}\n"
    credential = await api.post("/api/catalog/register", json={"content": b64(secret)})
    assert credential.status_code == 422 and "POST /api/credentials" in credential.json()["hint"]
    assert (await api.post("/api/catalog/list", json={})).json()["entries"] == []


async def test_lint_findings_are_stored_with_the_version(api: httpx.AsyncClient) -> None:
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: lonely, path: t/lonely}\n"
        "workflow:\n  - step: start\n    tool: {kind: noop}\n"
        "  - step: orphan\n    tool: {kind: noop}\n"
    )
    entry = await register(api, text)
    codes = {f["code"] for f in entry["findings"]}
    assert codes, "an unreachable step is a lint finding"
    stored = (await api.post("/api/catalog/resource", json={"path": "t/lonely"})).json()
    assert stored["findings"] == entry["findings"]


async def test_execute_status_detail_and_events(api: httpx.AsyncClient) -> None:
    await register(api, HELLO)
    started = await api.post(
        "/api/execute", json={"path": "examples/hello", "workload": {"name": "api"}}
    )
    assert started.status_code == 200, started.text
    body = started.json()
    execution_id = body["execution_id"]
    assert execution_id.isdigit() and body["status"] == "started"
    status = await wait_done(api, execution_id)
    assert status["completed"] and not status["failed"] and status["status"] == "COMPLETED"
    assert status["completed_steps"] == ["start", "shout"]
    assert status["end_time"] and status["duration_seconds"] >= 0
    detail = (await api.get(f"/api/executions/{execution_id}?page_size=10")).json()
    assert detail["path"] == "examples/hello" and detail["version"] == 1
    assert detail["result"] == {"shout": "HELLO API"}
    assert detail["progress"] == 100 and detail["pagination"]["page_size"] == 10
    ids = [e["event_id"] for e in detail["events"]]
    assert ids == sorted(ids, reverse=True) and all(isinstance(i, int) for i in ids)
    events = (await api.get(f"/api/executions/{execution_id}/events?page_size=500")).json()
    types = [e["event_type"] for e in reversed(events["events"])]
    assert types[0] == "playbook.execution.requested" and "step.done" in types
    only = await api.get(f"/api/executions/{execution_id}/events?event_type=step.done")
    assert {e["node_name"] for e in only.json()["events"]} == {"start", "shout"}
    listed = (await api.get("/api/executions")).json()
    assert listed[0]["execution_id"] == execution_id and listed[0]["status"] == "COMPLETED"
    assert (await api.get("/api/executions?status=FAILED")).json() == []
    assert len((await api.get("/api/executions?path=examples/hello")).json()) == 1


async def test_execute_by_catalog_id_and_version(api: httpx.AsyncClient) -> None:
    first = await register(api, HELLO)
    await register(api, HELLO.replace("name: world", "name: two"))
    by_version = await api.post("/api/execute", json={"path": "examples/hello", "version": 1})
    status = await wait_done(api, by_version.json()["execution_id"])
    assert status["completed"]
    detail = (await api.get(f"/api/executions/{by_version.json()['execution_id']}")).json()
    assert detail["result"] == {"shout": "HELLO WORLD"}
    by_id = await api.post(
        "/api/execute", json={"catalog_id": first["catalog_id"], "payload": {"name": "x"}}
    )
    await wait_done(api, by_id.json()["execution_id"])
    detail = (await api.get(f"/api/executions/{by_id.json()['execution_id']}")).json()
    assert detail["result"] == {"shout": "HELLO X"} and detail["catalog_id"] == first["catalog_id"]


async def test_execute_errors(api: httpx.AsyncClient) -> None:
    missing = await api.post("/api/execute", json={"path": "nope/nothing"})
    assert missing.status_code == 404
    assert missing.json()["detail"] == "Executable catalog entry not found: nope/nothing"
    assert (await api.post("/api/execute", json={})).status_code == 422
    wrong_kind = await api.post("/api/execute", json={"path": "x", "resource_kind": "mcp"})
    assert wrong_kind.status_code == 422
    assert wrong_kind.json()["code"] == "NOE872"  # the schema lists the executable kinds
    assert "resource_kind" in str(wrong_kind.json()["detail"])
    await register(api, "kind: Mcp\nmetadata: {name: tools, path: t/mcp}\n")
    not_runnable = await api.post("/api/execute", json={"path": "t/mcp"})
    assert not_runnable.status_code == 409  # a well-formed request naming what cannot run
    assert not_runnable.json()["detail"] == "Catalog kind 'mcp' is not executable"
    not_json = await api.post(
        "/api/execute", content=b"{", headers={"Content-Type": "application/json"}
    )
    assert not_json.status_code == 422 and not_json.json()["code"] == "NOE872"
    unknown = await api.get("/api/executions/999")
    assert unknown.status_code == 404 and unknown.json()["detail"] == "Execution 999 not found"
    assert (await api.get("/api/executions/999/status")).status_code == 404
    assert (await api.post("/api/executions/999/cancel", json={})).status_code == 404
    route = await api.get("/api/nothing-here")
    assert route.status_code == 404 and route.json()["code"] == "NOE871"


async def test_a_failed_run_shows_failed_and_its_error(api: httpx.AsyncClient) -> None:
    text = (
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: boom, path: t/boom}\n"
        "workflow:\n  - step: start\n    tool:\n      kind: python\n"
        "      code: |\n        raise ValueError('boom')\n"
    )
    await register(api, text)
    started = (await api.post("/api/execute", json={"path": "t/boom"})).json()
    status = await wait_done(api, started["execution_id"])
    assert status["completed"] and status["failed"] and status["status"] == "FAILED"
    assert "boom" in status["error"]


async def test_cancel_and_signal_a_listener(api: httpx.AsyncClient) -> None:
    await register(api, (PLAYBOOKS / "listener.yaml").read_text())
    one = (await api.post("/api/execute", json={"path": "tests/listener"})).json()["execution_id"]
    two = (await api.post("/api/execute", json={"path": "tests/listener"})).json()["execution_id"]
    reply = await api.post(f"/api/executions/{one}/cancel", json={"cascade": False})
    assert reply.status_code == 200
    assert reply.json()["status"] == "cancelled" and reply.json()["cancelled_executions"] == [one]
    status = await wait_done(api, one)
    assert status["status"] == "CANCELLED" and not status["failed"]
    again = (await api.post(f"/api/executions/{one}/cancel")).json()
    assert again["status"] == "already_completed" and again["cancelled_executions"] == []
    for _ in range(200):  # the listener waits in `start` (the status is folded incrementally)
        running = (await api.get(f"/api/executions/{two}/status")).json()
        if running["current_step"] == "start":
            break
        await asyncio.sleep(0.02)
    assert running["status"] == "RUNNING" and not running["completed"]
    assert running["current_step"] == "start" and running["end_time"] is None
    sent = await api.post(
        f"/api/executions/{two}/signal", json={"name": "approve", "data": {"user": "ann"}}
    )
    assert sent.status_code == 200, sent.text
    await wait_done(api, two)
    detail = (await api.get(f"/api/executions/{two}")).json()
    assert detail["status"] == "COMPLETED" and detail["result"] == {"approved_by": "ann"}
    late = await api.post(f"/api/executions/{two}/signal", json={"name": "approve"})
    assert late.status_code == 409


async def test_rerun_and_cleanup(api: httpx.AsyncClient) -> None:
    await register(api, HELLO)
    first = (await api.post("/api/execute", json={"path": "examples/hello"})).json()
    await wait_done(api, first["execution_id"])
    rerun = await api.post(
        f"/api/executions/{first['execution_id']}/rerun", json={"workload": {"name": "again"}}
    )
    second = rerun.json()["execution_id"]
    await wait_done(api, second)
    assert (await api.get(f"/api/executions/{second}")).json()["result"] == {"shout": "HELLO AGAIN"}
    dry = await api.post("/api/executions/cleanup", json={"older_than_minutes": 1, "dry_run": True})
    assert dry.json()["cancelled_count"] == 0
    bad = await api.post("/api/executions/cleanup", json={"older_than_minutes": 0})
    assert bad.status_code == 422


async def test_no_token_means_open_api(db_url: str) -> None:
    async with asgi_client(settings_for(db_url, token=None)) as client:
        assert (await client.get("/api/executions")).status_code == 200


@pytest.mark.parametrize("page", [0, -1])
async def test_bad_paging_is_422(api: httpx.AsyncClient, page: int) -> None:
    reply = await api.get(f"/api/executions?page={page}")
    assert reply.status_code == 422 and reply.json()["code"] == "NOE872"


async def test_an_in_memory_store_serves_too() -> None:
    async with asgi_client(settings_for("memory:")) as api:
        await register(api, HELLO)
        started = (await api.post("/api/execute", json={"path": "examples/hello"})).json()
        status = await wait_done(api, started["execution_id"])
        assert status["completed_steps"] == ["start", "shout"]
        detail = (await api.get(f"/api/executions/{started['execution_id']}")).json()
        assert detail["result"] == {"shout": "HELLO WORLD"}
