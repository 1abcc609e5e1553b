"""The service tables behind `CatalogStore`, one suite for every backend: the in-memory SQLite
double, a SQLite file, and PostgreSQL (a migrated throw-away schema; skipped with the reason
when the server is unreachable, a failure under CI=true).

Both stores share `CatalogTables` and differ only in their SQL files and the transaction of
`register`; this suite is what proves the two files say the same thing."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noetlc.runtime.catalog import SQLiteCatalog


@pytest.fixture(scope="module")
def pg_catalog_url() -> Iterator[str]:
    from noetlc.runtime.postgres.testing import dsn_or_skip, temporary_schema

    dsn_or_skip()
    with temporary_schema("noetl_catalog") as url:
        yield url


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        store: Any = SQLiteCatalog(":memory:")
    elif request.param == "sqlite":
        store = SQLiteCatalog(str(tmp_path / "noetl.db"))
    else:
        from noetlc.runtime.postgres.catalog import PostgresCatalog

        store = PostgresCatalog(request.getfixturevalue("pg_catalog_url"))
    try:
        yield store
    finally:
        store.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def test_register_versions_and_same_content(catalog: Any) -> None:
    path = unique("examples/hello")
    first, created = catalog.register(path, "playbook", "a: 1\n", {"a": 1}, b"\x00prog", [])
    assert created and first["version"] == 1 and first["program"] == b"\x00prog"
    again, created = catalog.register(path, "playbook", "a: 1\n", {"a": 1}, b"\x00prog", [])
    assert not created and again["catalog_id"] == first["catalog_id"]
    second, created = catalog.register(path, "playbook", "a: 2\n", {"a": 2}, None, [{"code": "X"}])
    assert created and second["version"] == 2 and second["program"] is None
    assert second["payload"] == {"a": 2} and second["findings"] == [{"code": "X"}]
    assert catalog.entry(path=path)["version"] == 2  # the newest by default
    assert catalog.entry(path=path, version=1)["content"] == "a: 1\n"
    assert catalog.entry(catalog_id=first["catalog_id"])["path"] == path
    assert catalog.entry(path=path, version=9) is None
    listed = catalog.entries(path=path)
    assert [e["version"] for e in listed] == [2, 1]
    assert all("program" not in e for e in listed)  # lists never carry the program
    assert catalog.entries(kind="credential", path=path) == []


def test_register_is_one_version_per_content_under_concurrency(catalog: Any) -> None:
    path = unique("race")
    results: list[tuple[dict[str, Any], bool]] = []

    def register(i: int) -> None:
        results.append(catalog.register(path, "playbook", f"v: {i % 3}\n", {}, None, []))

    threads = [threading.Thread(target=register, args=(i,)) for i in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(created for _, created in results) == 3
    versions = sorted(e["version"] for e in catalog.entries(path=path))
    assert versions == [1, 2, 3]


def test_credentials_round_trip_filter_and_delete(catalog: Any) -> None:
    name = unique("pg-main")
    made = catalog.put_credential(name, "postgres", b"cipher", {"host": "h"}, ["db"], "Main DB")
    assert made["id"].isdigit() and made["data"] == b"cipher" and made["tags"] == ["db"]
    updated = catalog.put_credential(name, "postgres", b"cipher2", None, [], None)
    assert updated["id"] == made["id"] and updated["data"] == b"cipher2" and updated["meta"] is None
    assert catalog.credential(made["id"])["name"] == name
    assert [c["name"] for c in catalog.credentials(type_="postgres", q=name.upper())] == [name]
    assert catalog.credentials(type_="http", q=name) == []
    digits = str(uuid.uuid4().int)[:12]  # a name made of digits is found by name too
    catalog.put_credential(digits, "token", b"t", None, [], None)
    assert catalog.credential(digits)["name"] == digits
    catalog.record_read(made, "api", "exec-1")
    catalog.record_read(made, "worker", None)
    reads = catalog.reads(name)
    assert [(r["who"], r["execution_id"]) for r in reads] == [("api", "exec-1"), ("worker", None)]
    assert catalog.delete_credential(name)["id"] == made["id"]
    assert catalog.credential(name) is None and catalog.delete_credential(name) is None


def test_variables_count_reads_and_delete(catalog: Any) -> None:
    execution = unique("exec")
    assert catalog.set_vars(execution, {"a": 1, "b": {"x": [1]}}, "user_defined", "start") == [
        "a",
        "b",
    ]
    listed = catalog.vars(execution)
    assert list(listed) == ["a", "b"] and listed["b"]["value"] == {"x": [1]}
    assert listed["a"]["access_count"] == 0 and listed["a"]["accessed_at"] is None
    assert catalog.var(execution, "a")["access_count"] == 1
    read = catalog.var(execution, "a")
    assert read["access_count"] == 2 and read["accessed_at"] is not None
    assert catalog.var(execution, "missing") is None
    catalog.set_vars(execution, {"a": "new"}, "step_result", None)
    assert catalog.vars(execution)["a"]["value"] == "new"
    assert catalog.delete_var(execution, "a") and not catalog.delete_var(execution, "a")
    assert catalog.delete_vars(execution) == 1 and catalog.vars(execution) == {}


def test_origins(catalog: Any) -> None:
    execution = unique("exec")
    catalog.record_origin(execution, "123", "examples/hello", 2)
    catalog.record_origin(execution, "999", "other", 1)  # the first record stays
    assert catalog.origin(execution) == {
        "catalog_id": "123",
        "path": "examples/hello",
        "version": 2,
    }
    assert catalog.origins()[execution]["version"] == 2
    assert catalog.origin(unique("none")) is None


def test_sqlite_files_commit_without_an_fsync_each(tmp_path: Path) -> None:
    """The catalog and the event store of one SQLite file both run in WAL mode with
    synchronous=NORMAL: a commit is durable at the next checkpoint. With the default (FULL)
    the catalog fsynced the origin row of every execution the API started (half its wall)."""
    from noetlc.runtime.event_store import SQLiteStore

    path = str(tmp_path / "noetl.db")
    for opened in (SQLiteCatalog(path), SQLiteStore(path)):
        db = opened._db
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
