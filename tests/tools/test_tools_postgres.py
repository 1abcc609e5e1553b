"""The postgres tool against the PostgreSQL named by NOETLC_TEST_PG_DSN (skipped when it is
unreachable, failing under CI=true). Each test module works in its own throw-away schema."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from noetlc.runtime.postgres.testing import dsn_or_skip
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.registry import ToolContext, call_tool

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def dsn() -> str:
    return dsn_or_skip()


@pytest.fixture(scope="module")
def schema(dsn: str) -> Iterator[str]:
    name = f"noetl_tools_{uuid.uuid4().hex[:10]}"
    assert (
        call_tool("postgres", {"auth": dsn, "command": f"CREATE SCHEMA {name}"})["status"] == "ok"
    )
    yield name
    call_tool("postgres", {"auth": dsn, "command": f"DROP SCHEMA {name} CASCADE"})


def pg(dsn: str, sql: str, params: list[object] | None = None) -> dict[str, object]:
    args: dict[str, object] = {"auth": dsn, "query": sql}
    if params is not None:
        args["params"] = params
    return call_tool("postgres", args)


def test_parameters_rows_and_json_values(dsn: str) -> None:
    out = pg(dsn, "SELECT $1::int AS n, $2::text AS s, $3::jsonb AS j", [7, "it's", {"a": [1]}])
    assert out["status"] == "ok", out
    result = out["result"]
    assert result["rows"] == [{"n": 7, "s": "it's", "j": {"a": [1]}}]  # type: ignore[index]
    assert result["columns"] == ["n", "s", "j"] and result["rowcount"] == 1  # type: ignore[index]
    assert out["pg"] == {"code": "00000", "sqlstate": "00000"}


def test_a_script_runs_in_one_transaction_and_returns_the_last_rows(dsn: str, schema: str) -> None:
    script = f"""
        CREATE TABLE {schema}.items (id int PRIMARY KEY, note text);
        INSERT INTO {schema}.items VALUES (1, 'a;b'), (2, $$semi;colon$$);
        SELECT id, note FROM {schema}.items ORDER BY id;
    """
    out = pg(dsn, script)
    assert out["status"] == "ok", out
    assert out["result"]["rows"] == [  # type: ignore[index]
        {"id": 1, "note": "a;b"},
        {"id": 2, "note": "semi;colon"},
    ]
    assert out["result"]["statements"] == 3  # type: ignore[index]
    changed = pg(dsn, f"UPDATE {schema}.items SET note = $1 WHERE id > $2", ["x", 0])
    assert changed["result"]["rowcount"] == 2 and changed["result"]["rows"] == []  # type: ignore[index]
    assert changed["result"]["status"] == "UPDATE 2"  # type: ignore[index]


def test_a_failing_script_leaves_nothing_behind(dsn: str, schema: str) -> None:
    out = pg(dsn, f"CREATE TABLE {schema}.half (a int); SELECT 1/0;")
    assert out["status"] == "error" and out["pg"]["sqlstate"] == "22012"  # type: ignore[index]
    missing = pg(dsn, f"SELECT * FROM {schema}.half")
    assert missing["pg"]["code"] == "42P01"  # type: ignore[index]  # undefined_table


def test_server_errors_carry_sqlstate_and_retryability(dsn: str, schema: str) -> None:
    pg(dsn, f"CREATE TABLE {schema}.u (id int PRIMARY KEY)")
    pg(dsn, f"INSERT INTO {schema}.u VALUES (1)")
    dup = pg(dsn, f"INSERT INTO {schema}.u VALUES ($1)", [1])
    assert dup["status"] == "error"
    assert dup["error"]["type"] == "UniqueViolationError"  # type: ignore[index]
    assert dup["pg"] == {"code": "23505", "sqlstate": "23505"}
    assert dup["error"]["retryable"] is False  # type: ignore[index]


def test_values_are_never_spliced_into_sql(dsn: str, schema: str) -> None:
    pg(dsn, f"CREATE TABLE {schema}.names (name text)")
    hostile = "x'); DROP TABLE names; --"
    assert pg(dsn, f"INSERT INTO {schema}.names VALUES ($1)", [hostile])["status"] == "ok"
    rows = pg(dsn, f"SELECT name FROM {schema}.names")["result"]["rows"]  # type: ignore[index]
    assert rows == [{"name": hostile}]


def test_params_with_several_statements_are_refused(dsn: str) -> None:
    out = pg(dsn, "SELECT $1::int; SELECT 2", [1])
    assert out["error"]["type"] == "ToolArgumentError"  # type: ignore[index]


def test_connection_from_a_keychain_entry_and_redaction(dsn: str) -> None:
    chain = Keychain(env={"NOETL_KEYCHAIN_PG_MAIN": json.dumps({"dsn": dsn})})
    out = call_tool(
        "postgres", {"connection": "pg_main", "sql": "SELECT 1 AS one"}, None,
        ToolContext(keychain=chain),
    )  # fmt: skip
    assert out["result"]["rows"] == [{"one": 1}], out
    # masking is by field: a DSN's password is secret, its user, host and database are not
    from urllib.parse import urlsplit

    password = urlsplit(dsn).password
    shown = json.dumps(chain.redact({"echo": dsn}))
    assert (password not in shown) if password else (dsn in shown)


def test_unreachable_server_is_a_retryable_connection_error() -> None:
    out = call_tool(
        "postgres", {"auth": "postgresql://postgres@127.0.0.1:9/x", "query": "SELECT 1"}
    )
    assert out["error"]["type"] == "ConnectionError" and out["error"]["retryable"] is True
    assert out["pg"]["code"] == "08001"


def test_a_statement_over_its_timeout_is_cancelled(dsn: str) -> None:
    out = call_tool("postgres", {"auth": dsn, "query": "SELECT pg_sleep(5)", "timeout": 0.2})
    assert out["error"]["type"] == "Timeout" and out["pg"]["code"] == "57014"
    assert pg(dsn, "SELECT 2 AS two")["result"]["rows"] == [{"two": 2}]  # type: ignore[index]


def test_a_cancel_stops_a_running_statement_on_the_server(dsn: str) -> None:
    marker = f"noetl_cancel_{uuid.uuid4().hex[:10]}"
    flag = threading.Event()
    threading.Timer(0.3, flag.set).start()
    started = time.monotonic()
    out = call_tool(
        "postgres",
        {"auth": dsn, "query": f"SELECT pg_sleep(30) AS {marker}"},
        None,
        ToolContext(cancelled=flag.is_set),
    )
    assert out["status"] == "error" and out["error"]["type"] == "Cancelled", out
    assert out["pg"]["code"] == "57014"
    assert time.monotonic() - started < 15  # not the statement's 30 s
    active = pg(
        dsn,
        "SELECT count(*) AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE $1",
        [f"%AS {marker}%"],
    )
    assert active["result"]["rows"] == [{"n": 0}], active  # type: ignore[index]
    assert pg(dsn, "SELECT 2 AS two")["result"]["rows"] == [{"two": 2}]  # type: ignore[index]


def test_a_keychain_value_that_is_no_connection_is_an_argument_error() -> None:
    chain = Keychain(env={"NOETL_KEYCHAIN_WEIRD": "[1, 2]"})
    out = call_tool(
        "postgres", {"auth": "weird", "query": "SELECT 1"}, None, ToolContext(keychain=chain)
    )
    assert out["error"]["type"] == "ToolArgumentError"
    assert "not a PostgreSQL connection" in out["error"]["message"]


def test_pools_are_cached_per_connection_and_closed_at_shutdown(dsn: str) -> None:
    from noetlc.stdlib_tools import aioloop, postgres_tool

    assert pg(dsn, "SELECT 1 AS a")["status"] == "ok"
    assert pg(dsn, "SELECT 2 AS a")["status"] == "ok"
    keys = list(postgres_tool._pools)
    assert keys == [json.dumps([{"dsn": dsn}, {}])]  # one pool; none for unreachable servers
    pool = postgres_tool._pools[keys[0]]
    aioloop.shutdown()  # what atexit runs
    assert postgres_tool._pools == {} and pool.is_closing()
    assert pg(dsn, "SELECT 3 AS a")["result"]["rows"] == [{"a": 3}]  # type: ignore[index]


def test_with_overrides_the_connection_fields_of_auth(dsn: str) -> None:
    # NoETL's `with:` (`db_name`, `db_host`, ...) connects to another database of the server
    out = call_tool(
        "postgres",
        {"auth": dsn, "with": {"db_name": "template1"}, "query": "SELECT current_database() AS d"},
    )
    assert out["status"] == "ok", out
    assert out["result"]["command_0"]["rows"] == [{"d": "template1"}]


def test_a_syntax_error_says_where_in_the_statement(dsn: str) -> None:
    sql = "SELECT 1,\n       2 FROMM nowhere"
    out = pg(dsn, sql)
    assert out["status"] == "error" and out["pg"]["sqlstate"] == "42601"  # type: ignore[index]
    position = out["error"]["position"]  # type: ignore[index]
    assert sql[position - 1 :].startswith("FROMM") or sql[position - 1 :].startswith("nowhere")
