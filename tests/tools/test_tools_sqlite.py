"""The sqlite tool: files relative to the playbook folder, parameters, scripts, errors."""

from __future__ import annotations

import threading
from pathlib import Path

from noetlc.stdlib_tools.registry import ToolContext, call_tool


def test_relative_database_parameters_and_scripts(tmp_path: Path) -> None:
    ctx = ToolContext(workdir=tmp_path)
    script = "CREATE TABLE t (id INTEGER PRIMARY KEY, note TEXT); INSERT INTO t VALUES (1, 'a;b')"
    assert (
        call_tool("sqlite", {"database": "data/app.db", "command": script}, None, ctx)["status"]
        == "error"
    )  # the folder does not exist yet: sqlite cannot create the file
    (tmp_path / "data").mkdir()
    created = call_tool("sqlite", {"database": "data/app.db", "command": script}, None, ctx)
    assert created["status"] == "ok" and created["result"]["statements"] == 2
    assert (tmp_path / "data" / "app.db").is_file()
    insert = call_tool(
        "sqlite",
        {
            "path": "data/app.db",
            "sql": "INSERT INTO t (note) VALUES (?), (?)",
            "params": ["x", "y"],
        },
        None,
        ctx,
    )
    assert insert["result"]["rowcount"] == 2
    named = call_tool(
        "sqlite",
        {
            "db": "data/app.db",
            "query": "SELECT note FROM t WHERE id > :n ORDER BY id",
            "params": {"n": 1},
        },
        None,
        ctx,
    )
    assert named["result"]["rows"] == [{"note": "x"}, {"note": "y"}]
    assert named["result"]["columns"] == ["note"] and named["result"]["row_count"] == 2


def test_a_failing_script_is_rolled_back(tmp_path: Path) -> None:
    ctx = ToolContext(workdir=tmp_path)
    call_tool(
        "sqlite", {"database": "a.db", "query": "CREATE TABLE t (a INTEGER UNIQUE)"}, None, ctx
    )
    bad = call_tool(
        "sqlite",
        {"database": "a.db", "query": "INSERT INTO t VALUES (1); INSERT INTO t VALUES (1)"},
        None,
        ctx,
    )
    assert bad["status"] == "error" and bad["error"]["type"] == "IntegrityError"
    assert bad["sqlite"]["code"] == "SQLITE_CONSTRAINT_UNIQUE"
    count = call_tool(
        "sqlite", {"database": "a.db", "query": "SELECT count(*) AS n FROM t"}, None, ctx
    )
    assert count["result"]["rows"] == [{"n": 0}]


def test_a_runaway_query_is_interrupted_at_its_timeout() -> None:
    endless = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT max(i) FROM r"
    out = call_tool("sqlite", {"query": endless, "timeout": 0.2})
    assert out["status"] == "error" and out["error"]["type"] == "Timeout"


def test_a_cancel_interrupts_a_running_query() -> None:
    endless = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT max(i) FROM r"
    flag = threading.Event()
    threading.Timer(0.3, flag.set).start()
    out = call_tool(
        "sqlite", {"query": endless, "timeout": 600}, None, ToolContext(cancelled=flag.is_set)
    )
    assert out["status"] == "error" and out["error"]["type"] == "Cancelled", out


def test_syntax_errors_and_missing_sql() -> None:
    bad = call_tool("sqlite", {"query": "SELEC 1"})
    assert bad["error"]["type"] == "OperationalError" and "syntax" in bad["error"]["message"]
    missing = call_tool("sqlite", {"database": ":memory:"})
    assert missing["error"]["type"] == "ToolArgumentError"
