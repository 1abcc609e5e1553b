"""Bounded lists: every list route is paged (at most `--max-page-size`), the catalog list
returns summaries (content only when asked), and catalog entries can be deleted — one
version or a whole path — while executions keep the program they ran."""

from __future__ import annotations

from pathlib import Path

import httpx

from noetlc.service.state import Limits
from noetlc.service.testing import asgi_client, b64, register, settings_for, wait_done

HELLO = (Path(__file__).resolve().parents[2] / "examples" / "hello.yaml").read_text()


def version(n: int) -> str:
    return HELLO.replace("name: world", f"name: w{n}")


async def test_the_catalog_list_is_paged_summaries(db_url: str) -> None:
    async with asgi_client(settings_for(db_url, limits=Limits(page_size=3))) as api:
        for n in range(5):
            await register(api, version(n))
        first = (await api.post("/api/catalog/list", json={"page_size": 2})).json()
        assert [e["version"] for e in first["entries"]] == [5, 4]
        assert first["pagination"]["total"] == 5 and first["pagination"]["has_next"] is True
        assert all(e["content"] is None and e["payload"] is None for e in first["entries"])
        assert all(e["content_bytes"] > 0 for e in first["entries"])
        third = (await api.get("/api/catalog/list", params={"page": 3, "page_size": 2})).json()
        assert [e["version"] for e in third["entries"]] == [1]
        assert third["pagination"]["has_next"] is False
        full = (
            await api.get("/api/catalog/list/Playbook", params={"include_content": "true"})
        ).json()
        assert len(full["entries"]) == 3  # the default page is capped at the limit
        assert "name: w4" in full["entries"][0]["content"]
        over = (await api.post("/api/catalog/list", json={"page_size": 4})).json()
        assert len(over["entries"]) == 3 and over["pagination"]["page_size"] == 3  # capped
        for bad in (
            {"page": 0},
            {"page_size": 0},
            {"page": "x"},
            {"include_content": "maybe"},
        ):
            reply = await api.post("/api/catalog/list", json=bad)
            assert reply.status_code == 422 and reply.json()["code"] == "NOE872", bad


async def test_entries_and_versions_can_be_deleted(api: httpx.AsyncClient) -> None:
    one = await register(api, version(1))
    two = await register(api, version(2))
    started = await api.post("/api/execute", json={"path": one["path"], "version": 1})
    execution_id = started.json()["execution_id"]
    await wait_done(api, execution_id)
    gone = await api.delete(f"/api/catalog/entries/{one['catalog_id']}")
    assert gone.status_code == 200 and gone.json()["deleted_versions"] == [1]
    again = await api.delete(f"/api/catalog/entries/{one['catalog_id']}")
    assert again.status_code == 404 and again.json()["code"] == "NOE871"
    listed = (await api.get("/api/catalog/list")).json()["entries"]
    assert [e["version"] for e in listed] == [2]
    # the execution keeps what it ran; rerunning the deleted version is refused
    detail = await api.get(f"/api/executions/{execution_id}")
    assert detail.status_code == 200 and detail.json()["status"] == "COMPLETED"
    rerun = await api.post(f"/api/executions/{execution_id}/rerun", json={})
    assert rerun.status_code == 404
    by_version = await api.delete("/api/catalog", params={"path": two["path"], "version": "2"})
    assert by_version.status_code == 200
    # numbering goes on past the version an execution ran (1), never giving it again
    assert (await register(api, version(3)))["version"] == 2
    assert (await register(api, version(4)))["version"] == 3
    whole = await api.delete("/api/catalog", params={"path": two["path"]})
    assert whole.status_code == 200 and whole.json()["deleted_versions"] == [2, 3]
    assert (await api.get("/api/catalog/list")).json()["entries"] == []
    missing = await api.delete("/api/catalog", params={"path": "nope"})
    assert missing.status_code == 404
    bad = await api.delete("/api/catalog", params={"path": two["path"], "version": "zero"})
    assert bad.status_code == 422


async def test_credentials_and_reads_are_paged(db_url: str) -> None:
    async with asgi_client(settings_for(db_url, limits=Limits(page_size=2))) as api:
        for n in range(3):
            made = await api.post("/api/credentials", json={"name": f"c{n}", "data": {"k": "v"}})
            assert made.status_code == 200
        page = (await api.get("/api/credentials", params={"page_size": 2})).json()
        assert len(page["items"]) == 2 and page["pagination"]["total"] == 3
        last = (await api.get("/api/credentials", params={"page": 2, "page_size": 2})).json()
        assert len(last["items"]) == 1
        over = (await api.get("/api/credentials", params={"page_size": 3})).json()
        assert len(over["items"]) == 2 and over["pagination"]["page_size"] == 2
        for _ in range(3):
            await api.get("/api/credentials/c0", params={"include_data": "true"})
        reads = (await api.get("/api/credentials/c0/reads", params={"page_size": 2})).json()
        assert len(reads["reads"]) == 2 and reads["pagination"]["total"] == 3


async def test_a_registered_body_over_the_limit_does_not_grow_the_store(db_url: str) -> None:
    async with asgi_client(settings_for(db_url, limits=Limits(body_bytes=64 * 1024))) as api:
        big = "#" + "x" * (100 * 1024) + "\n" + HELLO
        reply = await api.post("/api/catalog/register", json={"content": b64(big)})
        assert reply.status_code == 413
        assert (await api.get("/api/catalog/list")).json()["pagination"]["total"] == 0
