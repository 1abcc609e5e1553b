"""The log checker as the runtime, chaos and fault tests assert it (runtime/logcheck.py).

`assert_invariants(store)` fails with every violation of a store. The autouse fixture of
tests/conftest.py calls `check_after_test` after each test of tests/runtime_contract,
tests/postgres and tests/hostile: every SQLite store the test wrote under its `tmp_path`, and
the PostgreSQL schema of its `cluster`, must hold the invariants. A test that writes a broken
log on purpose is marked `@pytest.mark.log_violations`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from noetlc.runtime.logcheck import LogStore, violations

CHECKED_FOLDERS = ("runtime_contract", "postgres", "hostile")


def assert_invariants(store: LogStore, where: str = "the store") -> int:
    """Assert that every execution of `store` keeps the log's invariants; returns how many
    executions were checked."""
    found = violations(store)
    assert not found, f"{len(found)} log invariant violation(s) in {where}:\n" + "\n".join(
        str(v) for v in found[:30]
    )
    return len(store.executions())


def sqlite_stores(folder: Path) -> list[Path]:
    """The SQLite event stores under `folder` (files with an `events` table)."""
    out = []
    for path in sorted(folder.rglob("*.db")):
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as conn:
                row = conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'"
                ).fetchone()
        except sqlite3.Error:
            continue
        if row is not None:
            out.append(path)
    return out


def check_after_test(request: Any) -> None:
    """What the autouse fixture checks once a test of the folders above has passed."""
    from noetlc.runtime.event_store import SQLiteStore

    values = request.node.funcargs  # the fixtures' values (they were torn down meanwhile)
    if "tmp_path" in values:
        for path in sqlite_stores(values["tmp_path"]):
            store = SQLiteStore(str(path))
            try:
                assert_invariants(store, str(path))
            finally:
                store.close()
    url = getattr(values.get("cluster"), "url", None)  # a PostgreSQL cluster's schema
    if isinstance(url, str) and url.startswith(("postgresql://", "postgres://")):
        from noetlc.runtime.postgres.event_store import PostgresStore

        pg = PostgresStore(url)
        try:
            assert_invariants(pg, "the cluster's schema")
        finally:
            pg.close()
