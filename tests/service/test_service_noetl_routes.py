"""NoETL's client commands beyond run/status: `db init|validate`, `ehdb query ...` and `query
SQL` — the routes, embedded here (the NoETL client itself drives both modes in
test_noetl_client.py)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from noetlc.service.testing import register, wait_done

HELLO = (Path(__file__).resolve().parents[2] / "examples" / "hello.yaml").read_text()


async def _run(api: httpx.AsyncClient) -> str:
    path = (await register(api, HELLO))["path"]
    execution_id: str = (await api.post("/api/execute", json={"path": path})).json()["execution_id"]
    await wait_done(api, execution_id)
    return execution_id


async def test_db_init_and_validate(api: httpx.AsyncClient) -> None:
    init = (await api.post("/api/db/init")).json()
    assert init["status"] == "ok" and init["valid"] is True and init["backend"] == "sqlite"
    valid = (await api.get("/api/db/validate")).json()
    assert valid["valid"] is True and valid["version"] >= 1


async def test_ehdb_reads_executions_and_events_without_payloads(api: httpx.AsyncClient) -> None:
    execution_id = await _run(api)
    listed = (await api.get("/api/ehdb/executions", params={"status": "COMPLETED"})).json()
    assert [e["execution_id"] for e in listed["executions"]] == [execution_id]
    assert listed["executions"][0]["terminal"] is True
    assert (await api.get("/api/ehdb/executions", params={"status": "FAILED"})).json()[
        "executions"
    ] == []
    state = (await api.get(f"/api/ehdb/executions/{execution_id}")).json()
    assert state["exists"] is True and state["state"]["event_count"] > 0
    assert state["state"]["path"] == "examples/hello"
    missing = (await api.get("/api/ehdb/executions/12345")).json()
    assert missing["exists"] is False and missing["state"] is None
    events = (
        await api.get(f"/api/ehdb/executions/{execution_id}/events", params={"limit": 3})
    ).json()
    assert events["returned"] == 3 and events["next_cursor"] == events["events"][-1]["event_id"]
    rest = (
        await api.get(
            f"/api/ehdb/executions/{execution_id}/events",
            params={"after": events["next_cursor"], "limit": 1000},
        )
    ).json()
    ids = [int(e["event_id"]) for e in events["events"] + rest["events"]]
    assert ids == sorted(ids) and len(ids) == state["state"]["event_count"]
    text = str(events) + str(rest)
    assert "HELLO WORLD" not in text and "greeting" not in text  # no results in the read model
    tier = (await api.get("/api/ehdb/tiers/eventlog", params={"limit": 2})).json()
    assert tier["returned"] == 2
    assert (await api.get("/api/ehdb/tiers/kv")).status_code == 422  # our store has one tier


async def test_query_is_read_only_and_bounded(
    api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from noetlc.service import sql_query

    monkeypatch.setattr(sql_query, "QUERY_TIMEOUT", 0.5)
    execution_id = await _run(api)
    reply = await api.post(
        "/api/postgres/execute",
        json={"query": "SELECT execution_id, status FROM executions", "schema": "noetl"},
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"] == [[execution_id, "completed"]]
    assert reply.json()["columns"] == ["execution_id", "status"]
    for sql in (
        "DELETE FROM executions",
        "CREATE TABLE x (a int)",
        "SELECT 1; DELETE FROM executions",
        "SELECT * FROM no_such_table",
    ):
        refused = await api.post("/api/postgres/execute", json={"query": sql})
        assert refused.status_code == 400 and refused.json()["code"] == "NOE883", sql
    slow = await api.post(
        "/api/postgres/execute",
        json={
            "query": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"
            " SELECT count(*) FROM n"
        },
    )
    assert slow.status_code == 400 and "timeout" in slow.json()["detail"]
    still = await api.post(
        "/api/postgres/execute", json={"query": "SELECT count(*) AS n FROM executions"}
    )
    assert still.json()["result"] == [[1]]
    assert (await api.post("/api/postgres/execute", json={})).status_code == 422


async def test_sqlite_query_cannot_reach_beyond_reading(
    api: httpx.AsyncClient, tmp_path: Path
) -> None:
    # a read-only connection still ATTACHes (creating the file) and VACUUMs INTO a new file
    await _run(api)
    outside = tmp_path / "outside.db"
    for sql in (
        f"ATTACH DATABASE '{outside}' AS x",
        f"VACUUM INTO '{outside}'",
        "PRAGMA query_only = OFF",
        "SELECT load_extension('x')",
    ):
        refused = await api.post("/api/postgres/execute", json={"query": sql})
        assert refused.status_code == 400 and refused.json()["code"] == "NOE883", sql
        assert not outside.exists(), sql
        detail = refused.json()["detail"]
        assert "only reading" in detail or "function: load_extension" in detail, detail
    columns = await api.post(
        "/api/postgres/execute", json={"query": "SELECT name FROM pragma_table_info('executions')"}
    )
    assert columns.status_code == 200 and ["status"] in columns.json()["result"], columns.text


POSTGRES_REFUSED = [
    "COPY (SELECT 1) TO PROGRAM 'true'",  # a shell command as the database's OS user
    "DO $$ BEGIN PERFORM 1; END $$",
    "SET ROLE postgres",
    "SELECT pg_read_file('/etc/hostname')",
    "SELECT \"SET_CONFIG\"('role', 'postgres', true)",
    "select pg_catalog . set_config('role', 'postgres', true)",
    "SELECT query_to_xml('SELECT 1', true, true, '')",
    "SELECT pg_terminate_backend(pg_backend_pid())",
    'SELECT U&"\\0070g_sleep"(0)',
    "/* SELECT */ LOCK executions",
]


@pytest.mark.postgres
async def test_postgres_query_cannot_reach_beyond_reading(tmp_path: Path) -> None:
    from noetlc.runtime.postgres.testing import dsn_or_skip, temporary_schema
    from noetlc.service.testing import asgi_client, settings_for

    dsn_or_skip()
    marker = tmp_path / "ran"
    with temporary_schema("noetl_query") as url:
        async with asgi_client(settings_for(url)) as api:
            for sql in [*POSTGRES_REFUSED, f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'"]:
                reply = await api.post("/api/postgres/execute", json={"query": sql})
                assert reply.status_code == 400, (sql, reply.text)
                assert reply.json()["code"] == "NOE883", sql
            assert not marker.exists()
            who = await api.post(
                "/api/postgres/execute",
                json={"query": "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"},
            )
            # a superuser store queries as pg_read_all_data; another role is itself: never super
            assert who.status_code == 200 and who.json()["result"] in ([[False]], []), who.text
            rows = await api.post(
                "/api/postgres/execute",
                json={"query": "-- the store\n(SELECT count(*) AS n FROM executions)"},
            )
            assert rows.status_code == 200 and rows.json()["result"] == [[0]], rows.text
