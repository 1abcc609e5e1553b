"""`call_tool` itself: dispatch, argument validation, the envelope, the old entry point."""

from __future__ import annotations

import pytest

from noetlc.stdlib_tools import basic
from noetlc.stdlib_tools.kinds import BUILTIN, argument_names
from noetlc.stdlib_tools.registry import call_tool
from noetlc.stdlib_tools.sql_split import split_statements


def test_every_builtin_kind_has_a_schema_and_a_runner_or_is_answered_by_the_vm() -> None:
    for name, record in BUILTIN.items():
        assert record.name == name
        assert record.schema.model_fields, name
        assert record.module is not None or name in ("noop", "workbook"), name


def test_noop_returns_result_else_input() -> None:
    assert call_tool("noop", {"input": 1})["result"] == 1
    assert call_tool("noop", {"input": 1, "result": {"m": 2}})["result"] == {"m": 2}
    assert call_tool("noop", None)["result"] is None


@pytest.mark.parametrize(
    ("kind", "args", "fragment"),
    [
        ("http", {"url": 5, "header": {}}, "url"),
        ("shell", {"command": 5}, "command"),
        ("postgres", {"query": "SELECT 1"}, "needs `auth:`"),
    ],
)
def test_bad_rendered_arguments_are_tool_argument_errors(
    kind: str, args: dict[str, object], fragment: str
) -> None:
    out = call_tool(kind, args)
    assert out["status"] == "error" and out["error"]["type"] == "ToolArgumentError"
    assert fragment in out["error"]["message"]


def test_unknown_kinds_and_workbook_are_unavailable_here() -> None:
    assert call_tool("ftp", {})["error"]["type"] == "ToolUnavailable"
    assert call_tool("workbook", {"name": "w"})["error"]["type"] == "ToolUnavailable"


def test_the_old_entry_point_still_works() -> None:
    out = basic.call_tool("python", {"code": "result = 41 + 1"}, None)
    assert out == {
        "status": "ok",
        "result": 42,
        "error": None,
        "meta": {"kind": "python", "duration_ms": out["meta"]["duration_ms"]},
    }


@pytest.mark.parametrize(
    ("sql", "statements"),
    [
        ("SELECT 1", ["SELECT 1"]),
        ("SELECT 1; SELECT 2;", ["SELECT 1", "SELECT 2"]),
        ("SELECT 'a;b'; SELECT 'it''s;'", ["SELECT 'a;b'", "SELECT 'it''s;'"]),
        ("SELECT E'\\';' ; SELECT 2", ["SELECT E'\\';'", "SELECT 2"]),
        ('SELECT "a;b" FROM t', ['SELECT "a;b" FROM t']),
        ("-- a; comment\nSELECT 1; /* x; /* nested; */ y; */ SELECT 2", ["-- a; comment\nSELECT 1", "/* x; /* nested; */ y; */ SELECT 2"]),
        ("CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql; SELECT f()",
         ["CREATE FUNCTION f() RETURNS int AS $body$ SELECT 1; $body$ LANGUAGE sql", "SELECT f()"]),
        ("SELECT $1::int; SELECT $$;$$", ["SELECT $1::int", "SELECT $$;$$"]),
        ("  ;\n-- only a comment\n", []),
    ],
)  # fmt: skip
def test_sql_scripts_split_at_top_level_semicolons(sql: str, statements: list[str]) -> None:
    assert split_statements(sql) == statements


def test_docs_list_every_argument_spelling() -> None:
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "tools.md").read_text()
    for kind, record in BUILTIN.items():
        assert f"`{kind}`" in docs, kind
        for name in argument_names(record.schema):
            assert f"`{name}`" in docs, f"docs/tools.md does not mention `{name}` of {kind}"
