"""The SQLite store's SQL: runtime/sql/schema.sql is what opening a store makes, and the
named statements bind by name (but the hot event insert, by position, in ENVELOPE order).
The PostgreSQL side of schema.sql is tests/postgres/test_pg_schema_sql.py."""

from __future__ import annotations

import re
import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any

from noetlc.runtime.catalog import SQLiteCatalog
from noetlc.runtime.event_store import LOG_COLUMNS, SQLiteStore
from noetlc.runtime.ownership import ExecutionLease
from noetlc.runtime.postgres.queries import queries as pg_queries
from noetlc.runtime.sql_files import sqlite_queries
from noetlc.vm.protocol import ENVELOPE


def describe(path: Path) -> dict[str, Any]:
    """Tables (columns, keys, AUTOINCREMENT), indexes and `user_version` of a SQLite file."""
    db = sqlite3.connect(path)
    try:
        out: dict[str, Any] = {"user_version": db.execute("PRAGMA user_version").fetchone()[0]}
        objects = db.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master"
            " WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()
        for kind, name, table, sql in objects:
            if kind == "table":
                out[f"table {name}"] = {
                    "columns": db.execute(f"PRAGMA table_xinfo({name})").fetchall(),
                    "foreign keys": db.execute(f"PRAGMA foreign_key_list({name})").fetchall(),
                    "autoincrement": "autoincrement" in sql.lower(),
                    "indexes": sorted(
                        (
                            row[1],
                            row[2],
                            row[3],
                            row[4],
                            *db.execute(f"PRAGMA index_xinfo({row[1]})"),
                        )
                        for row in db.execute(f"PRAGMA index_list({name})")
                    ),
                }
            else:
                out[f"{kind} {name}"] = table
        return out
    finally:
        db.close()


def test_schema_sql_is_what_opening_a_store_makes(tmp_path: Path) -> None:
    made = tmp_path / "opened.db"
    SQLiteStore(str(made)).close()  # the event store, upgraded to SCHEMA_VERSION
    SQLiteCatalog(str(made)).close()  # the service's tables
    ExecutionLease(str(made), "x").owner()  # the owners table
    written = tmp_path / "schema.db"
    text = resources.files("noetlc.runtime").joinpath("sql", "schema.sql").read_text()
    db = sqlite3.connect(written)
    db.executescript(text)
    db.close()
    assert describe(written) == describe(made), (
        "runtime/sql/schema.sql is not what opening a store makes: update it with the change"
    )


def test_statements_bind_by_name_but_the_hot_insert() -> None:
    for name, sql in sqlite_queries().items():
        if name != "event_insert":
            assert not re.search(r"\?", sql), name


def test_the_positional_statements_follow_the_envelope() -> None:
    q = sqlite_queries()
    insert = re.search(r"INSERT INTO events \((.*?)\)", q["event_insert"], re.S)
    assert insert is not None
    assert [c.strip() for c in insert.group(1).split(",")] == [
        "execution_id",
        "seq",
        *ENVELOPE,
        "payload",
    ]
    read = re.search(r"SELECT (.*?)\s+FROM events", q["event_read"], re.S)
    assert read is not None
    assert [c.strip() for c in read.group(1).split(",")] == ["seq", *ENVELOPE, "payload"]
    logs = re.search(r"SELECT (.*?)\s+FROM logs", q["log_read"], re.S)
    assert logs is not None
    assert [c.strip() for c in logs.group(1).split(",")] == ["seq", *LOG_COLUMNS]


def test_catalog_statements_take_as_many_values_on_both_backends() -> None:
    """The catalog binds SQLite's statements by name and PostgreSQL's by position, with the
    same keywords (runtime/catalog.py): each pair takes as many values."""
    sqlite, pg = sqlite_queries(), pg_queries()
    shared = [
        n
        for n in sqlite
        if n in pg and n.split("_")[0] in ("catalog", "credential", "var", "origin")
    ]
    assert len(shared) >= 20
    for name in shared:
        named = set(re.findall(r":([a-z_]+)", sqlite[name]))
        numbered = {int(n) for n in re.findall(r"\$(\d+)", pg[name])}
        assert len(named) == max(numbered, default=0), name
