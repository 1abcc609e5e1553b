"""The duckdb tool (skipped when duckdb is not installed) and its ToolUnavailable fallback."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import pytest

from noetlc.stdlib_tools import duckdb_tool
from noetlc.stdlib_tools.registry import ToolContext, call_tool

needs_duckdb = pytest.mark.skipif(
    importlib.util.find_spec("duckdb") is None,
    reason="duckdb is not installed (pip install 'noetlc[duckdb]')",
)


@needs_duckdb
def test_scripts_parameters_and_changed_rows(tmp_path: Path) -> None:
    ctx = ToolContext(workdir=tmp_path)
    made = call_tool(
        "duckdb",
        {
            "database": "w.duckdb",
            "command": "CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2)",
        },
        None,
        ctx,
    )
    assert made["status"] == "ok" and made["result"]["rowcount"] == 2
    assert made["result"]["rows"] == [] and (tmp_path / "w.duckdb").is_file()
    listed = call_tool(
        "duckdb", {"database": "w.duckdb", "query": "SELECT a FROM t WHERE a > ? ORDER BY a", "params": [0]},
        None, ctx,
    )  # fmt: skip
    assert listed["result"]["rows"] == [{"a": 1}, {"a": 2}]
    named = call_tool("duckdb", {"query": "SELECT $x::INT + 1 AS y", "params": {"x": 41}})
    assert named["result"]["rows"] == [{"y": 42}]


@needs_duckdb
def test_errors_are_outcomes() -> None:
    out = call_tool("duckdb", {"query": "SELECT * FROM missing_table"})
    assert out["status"] == "error" and out["error"]["type"] == "CatalogException"


def test_without_duckdb_the_outcome_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(duckdb_tool, "load_duckdb", lambda: None)
    out = call_tool("duckdb", {"query": "SELECT 1"})
    assert out["error"]["type"] == "ToolUnavailable"
    assert "pip install duckdb" in out["error"]["hint"]


@needs_duckdb
def test_a_cancel_interrupts_a_running_query() -> None:
    endless = "SELECT count(*) FROM range(1000000000000) a"
    flag = threading.Event()
    threading.Timer(0.3, flag.set).start()
    out = call_tool("duckdb", {"query": endless}, None, ToolContext(cancelled=flag.is_set))
    assert out["status"] == "error" and out["error"]["type"] == "Cancelled", out
