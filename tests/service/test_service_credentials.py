"""Credentials: CRUD, AES-GCM at rest, values only when asked and allowed, reads recorded,
the keychain of an execution resolving from the store, values redacted from what the API
shows."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from noetlc.runtime.credentials import (
    Cipher,
    CredentialKeyError,
    load_key,
    new_key,
    parse_key,
)
from noetlc.service.testing import asgi_client, register, settings_for, wait_done

SECRET = "pa55-w0rd-xyz"
USES_SECRET = """apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: uses_secret, path: t/uses_secret}
keychain:
  - {name: pg_local, kind: postgres_credential}
workflow:
  - step: start
    tool:
      kind: python
      input: {pw: "{{ keychain.pg_local.password }}"}
      code: |
        result = {"length": len(pw), "echo": "pw=" + pw}
"""


def credential(**extra: object) -> dict[str, object]:
    return {
        "name": "pg_local",
        "type": "postgres",
        "data": {"user": "app", "password": SECRET},
        "tags": "db, local",
        "description": "Local PG",
        **extra,
    }


async def test_crud_and_values_only_when_asked(api: httpx.AsyncClient, db_url: str) -> None:
    created = await api.post("/api/credentials", json=credential())
    assert created.status_code == 200, created.text
    body = created.json()
    assert body["id"].isdigit() and body["tags"] == ["db", "local"] and "data" not in body
    # upsert by name: same id, new type
    aliased = {k: v for k, v in credential(credential_type="pg").items() if k != "type"}
    again = (await api.post("/api/credentials", json=aliased)).json()
    assert again["id"] == body["id"] and again["type"] == "pg"
    listed = (await api.get("/api/credentials?q=local")).json()
    assert [i["name"] for i in listed["items"]] == ["pg_local"] and "data" not in listed["items"][0]
    assert listed["filter"] == {"type": None, "q": "local"}
    assert (await api.get("/api/credentials?type=nothing")).json()["items"] == []
    plain = (await api.get("/api/credentials/pg_local")).json()
    assert "data" not in plain and SECRET not in json.dumps(plain)
    by_id = await api.get(f"/api/credentials/{body['id']}?include_data=true&execution_id=7")
    assert by_id.json()["data"] == {"user": "app", "password": SECRET}
    reads = (await api.get("/api/credentials/pg_local/reads")).json()["reads"]
    assert (
        len(reads) == 1 and reads[0]["execution_id"] == "7" and reads[0]["who"].startswith("api:")
    )
    # at rest: the store file never holds the value in clear
    path = Path(db_url[len("sqlite:///") :])
    raw = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    assert SECRET.encode() not in raw and b"pg_local" in raw
    deleted = (await api.delete("/api/credentials/pg_local")).json()
    assert deleted == {
        "message": "Credential deleted successfully",
        "id": body["id"],
        "name": "pg_local",
    }
    missing = await api.get("/api/credentials/pg_local")
    assert missing.status_code == 404 and missing.json()["detail"] == "Credential not found"
    assert (await api.delete("/api/credentials/pg_local")).status_code == 404
    bad = await api.post("/api/credentials", json={"name": "x"})
    assert bad.status_code == 422 and bad.json()["code"] == "NOE872"


async def test_values_can_be_refused(db_url: str) -> None:
    async with asgi_client(settings_for(db_url, allow_credential_values=False)) as api:
        await api.post("/api/credentials", json=credential())
        refused = await api.get("/api/credentials/pg_local?include_data=true")
        assert refused.status_code == 403 and refused.json()["code"] == "NOE876"
        assert SECRET not in refused.text


async def test_the_keychain_resolves_from_the_store_and_stays_redacted(
    api: httpx.AsyncClient,
) -> None:
    await api.post("/api/credentials", json=credential())
    await register(api, USES_SECRET)
    started = (await api.post("/api/execute", json={"path": "t/uses_secret"})).json()
    status = await wait_done(api, started["execution_id"])
    assert status["status"] == "COMPLETED", status
    detail = await api.get(f"/api/executions/{started['execution_id']}?page_size=500")
    assert detail.json()["result"]["length"] == len(SECRET)
    assert SECRET not in detail.text and "***" in detail.text
    events = await api.get(f"/api/executions/{started['execution_id']}/events?page_size=500")
    assert SECRET not in events.text
    reads = (await api.get("/api/credentials/pg_local/reads")).json()["reads"]
    assert [r["execution_id"] for r in reads] == [started["execution_id"]]
    assert reads[0]["who"] == "keychain:embedded"


def test_the_cipher_binds_the_name_and_needs_the_key() -> None:
    key = parse_key(new_key(), "test")
    sealed = Cipher(key).seal("a", {"v": 1})
    assert Cipher(key).open("a", sealed) == {"v": 1}
    from cryptography.exceptions import InvalidTag

    with pytest.raises(InvalidTag):
        Cipher(key).open("b", sealed)
    with pytest.raises(InvalidTag):
        Cipher(parse_key(new_key(), "test")).open("a", sealed)


def test_keys_come_from_the_environment_or_a_file(tmp_path: Path) -> None:
    text = new_key()
    assert load_key(env={"NOETL_CREDENTIAL_KEY": text}) == parse_key(text, "x")
    hexed = parse_key(text, "x").hex()
    (tmp_path / "key").write_text(hexed + "\n")
    assert load_key(str(tmp_path / "key"), env={}) == parse_key(text, "x")
    for bad in ({}, {"NOETL_CREDENTIAL_KEY": "short"}):
        with pytest.raises(CredentialKeyError) as info:
            load_key(env=bad)
        assert info.value.code == "NOE874"
    with pytest.raises(CredentialKeyError):
        load_key(str(tmp_path / "missing"), env={})


async def test_a_wrong_key_is_a_clear_error_naming_its_source(db_url: str) -> None:
    from noetlc.runtime.credentials import new_key, parse_key
    from noetlc.service.testing import asgi_client, settings_for, wait_done

    async with asgi_client(settings_for(db_url)) as api:
        made = await api.post("/api/credentials", json={"name": "pg", "data": {"password": "x1"}})
        assert made.status_code == 200
    other = settings_for(db_url, credential_key=parse_key(new_key(), "t"))
    other.key_source = "/srv/noetl/credential.key"
    async with asgi_client(other) as api:
        reply = await api.get("/api/credentials/pg", params={"include_data": "true"})
        assert reply.status_code == 409 and reply.json()["code"] == "NOE874"
        assert "/srv/noetl/credential.key" in reply.json()["detail"]
        playbook = (
            "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: k, path: t/k}\n"
            "keychain: [{name: pg, kind: credential}]\n"
            "workflow:\n  - step: start\n    tool: {kind: python, auth: pg, code: 'result = 1'}\n"
        )
        import base64

        body = {"content": base64.b64encode(playbook.encode()).decode()}
        assert (await api.post("/api/catalog/register", json=body)).status_code == 200
        started = await api.post("/api/execute", json={"path": "t/k"})
        status = await wait_done(api, started.json()["execution_id"])
        detail = (await api.get(f"/api/executions/{started.json()['execution_id']}")).json()
        text = json.dumps(detail["summary"])
        assert status["failed"] and "NOE874" in text and "/srv/noetl/credential.key" in text
