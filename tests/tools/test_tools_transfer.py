"""The transfer tool: batched copies between postgres, sqlite, duckdb and http, against the real
databases (PostgreSQL from NOETLC_TEST_PG_DSN, skipped with the reason where unreachable,
except under CI) and a local HTTP server."""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.postgres.testing import dsn_or_skip
from noetlc.stdlib_tools.registry import ToolContext, call_tool

POSTS = [
    {"userId": 1, "id": i, "title": f"t{i}", "body": f"b'{i}", "meta": {"tags": ["x", i]}}
    for i in range(1, 26)
]
RECEIVED: list[list[dict[str, object]]] = []


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def _json(self, status: int, data: object) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/posts"):
            self._json(200, POSTS)
        elif self.path.startswith("/wrapped"):
            self._json(200, {"data": {"items": POSTS[:3]}})
        else:
            self._json(404, {"error": "no"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        batch = json.loads(self.rfile.read(length))
        if self.path.startswith("/refuse"):
            self._json(500, {"error": "down"})
            return
        RECEIVED.append(batch)
        self._json(201, {"accepted": len(batch)})


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def dsn() -> str:
    return dsn_or_skip()


@pytest.fixture
def schema(dsn: str) -> Iterator[str]:
    name = f"noetl_transfer_{uuid.uuid4().hex[:8]}"
    assert (
        call_tool("postgres", {"auth": dsn, "command": f"CREATE SCHEMA {name}"})["status"] == "ok"
    )
    yield name
    call_tool("postgres", {"auth": dsn, "command": f"DROP SCHEMA {name} CASCADE"})


def transfer(args: dict[str, object], workdir: Path) -> dict[str, object]:
    return call_tool("transfer", args, None, ToolContext(workdir=workdir))


def pg(dsn: str, sql: str) -> list[dict[str, object]]:
    out = call_tool("postgres", {"auth": dsn, "query": sql})
    assert out["status"] == "ok", out
    return out["result"]["rows"]  # type: ignore[no-any-return,index]


def test_http_to_postgres_with_mapping_and_type_coercion(
    base_url: str, dsn: str, schema: str, tmp_path: Path
) -> None:
    table = f"{schema}.posts"
    pg(dsn, f"CREATE TABLE {table} (id SERIAL PRIMARY KEY, post_id INTEGER, user_id INTEGER, "
            "title TEXT, body TEXT, tags JSONB, fetched_at TIMESTAMPTZ DEFAULT NOW())")  # fmt: skip
    out = transfer(
        {
            "source": {"type": "http", "url": f"{base_url}/posts", "method": "GET"},
            "target": {"type": "postgres", "auth": dsn, "table": table,
                       "mapping": {"user_id": "userId", "post_id": "id", "title": "title",
                                   "body": "body", "tags": "meta.tags"}},
            "chunk_size": 10,
        },
        tmp_path,
    )  # fmt: skip
    assert out["status"] == "ok", out
    assert out["result"]["rows_transferred"] == 25 and out["result"]["batches"] == 3  # type: ignore[index]
    rows = pg(dsn, f"SELECT post_id, user_id, body, tags, fetched_at IS NOT NULL AS stamped "
                   f"FROM {table} ORDER BY post_id")  # fmt: skip
    assert len(rows) == 25
    assert rows[1] == {"post_id": 2, "user_id": 1, "body": "b'2", "tags": ["x", 2], "stamped": True}


def test_postgres_to_sqlite_replace_then_upsert(dsn: str, schema: str, tmp_path: Path) -> None:
    src = f"{schema}.src"
    pg(dsn, f"CREATE TABLE {src} (id INT PRIMARY KEY, name TEXT, amount NUMERIC(10,2), "
            "at TIMESTAMPTZ)")  # fmt: skip
    pg(dsn, f"INSERT INTO {src} SELECT g, 'n' || g, g * 1.5, '2026-01-01T00:00:00Z' "
            "FROM generate_series(1, 7) g")  # fmt: skip
    db = tmp_path / "out.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE dst (id INTEGER PRIMARY KEY, name TEXT, amount REAL, at TEXT)")
        conn.execute("INSERT INTO dst VALUES (99, 'old', 0, NULL)")
    base = {
        "source": {"type": "postgres", "auth": dsn,
                   "query": f"SELECT id, name, amount, at FROM {src} ORDER BY id"},
        "target": {"type": "sqlite", "database": "out.db", "table": "dst"},
        "chunk_size": 3,
    }  # fmt: skip
    out = transfer({**base, "mode": "replace"}, tmp_path)
    assert out["status"] == "ok", out
    assert out["result"]["batches"] == 3  # type: ignore[index]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, name, amount FROM dst ORDER BY id").fetchall()
    assert rows == [(i, f"n{i}", i * 1.5) for i in range(1, 8)]  # the old row is gone
    pg(dsn, f"UPDATE {src} SET name = 'changed' WHERE id = 2")
    up = transfer({**base, "mode": "upsert", "target": {**base["target"], "key": "id"}}, tmp_path)  # type: ignore[dict-item]
    assert up["status"] == "ok", up
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*), max(name) FROM dst").fetchone() == (7, "n7")
        assert conn.execute("SELECT name FROM dst WHERE id = 2").fetchone() == ("changed",)


def test_sqlite_to_duckdb_and_back_to_postgres(dsn: str, schema: str, tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "a.db") as conn:
        conn.execute("CREATE TABLE items (k TEXT, v INTEGER)")
        conn.executemany("INSERT INTO items VALUES (?, ?)", [(f"k{i}", i) for i in range(50)])
    import duckdb

    with duckdb.connect(str(tmp_path / "w.duckdb")) as conn:
        conn.execute("CREATE TABLE items (k VARCHAR, v INTEGER)")
    out = transfer(
        {"source": {"type": "sqlite", "database": "a.db", "query": "SELECT k, v FROM items "
                    "WHERE v >= ?", "params": [10]},
         "target": {"type": "duckdb", "database": "w.duckdb", "table": "items"},
         "batch_size": 16},
        tmp_path,
    )  # fmt: skip
    assert out["status"] == "ok", out
    assert out["result"]["rows_transferred"] == 40  # type: ignore[index]
    pg(dsn, f"CREATE TABLE {schema}.items (k TEXT, v BIGINT)")
    back = transfer(
        {"source": {"type": "duckdb", "database": "w.duckdb", "query": "SELECT * FROM items"},
         "target": {"type": "postgres", "auth": dsn, "table": f"{schema}.items"}},
        tmp_path,
    )  # fmt: skip
    assert back["status"] == "ok", back
    assert pg(dsn, f"SELECT count(*) AS n, sum(v) AS s FROM {schema}.items") == [
        {"n": 40, "s": sum(range(10, 50))}
    ]


def test_sqlite_to_http_posts_batches(base_url: str, tmp_path: Path) -> None:
    RECEIVED.clear()
    with sqlite3.connect(tmp_path / "a.db") as conn:
        conn.execute("CREATE TABLE t (id INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(5)])
    out = transfer(
        {"source": {"type": "sqlite", "database": "a.db", "query": "SELECT id FROM t"},
         "target": {"type": "http", "url": f"{base_url}/sink"}, "chunk_size": 2},
        tmp_path,
    )  # fmt: skip
    assert out["status"] == "ok", out
    assert [len(b) for b in RECEIVED] == [2, 2, 1]
    refused = transfer(
        {"source": {"type": "sqlite", "database": "a.db", "query": "SELECT id FROM t"},
         "target": {"type": "http", "url": f"{base_url}/refuse"}},
        tmp_path,
    )  # fmt: skip
    assert refused["error"]["type"] == "HttpError"  # type: ignore[index]


def test_http_source_with_data_path_and_a_failing_target_rolls_back(
    base_url: str, tmp_path: Path
) -> None:
    with sqlite3.connect(tmp_path / "a.db") as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, title TEXT)")
        conn.execute("INSERT INTO t VALUES (2, 'taken')")
    out = transfer(
        {"source": {"type": "http", "url": f"{base_url}/wrapped", "data_path": "data.items"},
         "target": {"type": "sqlite", "database": "a.db", "table": "t",
                    "mapping": {"id": "id", "title": "title"}},
         "chunk_size": 1},
        tmp_path,
    )  # fmt: skip
    assert out["status"] == "error" and "UNIQUE" in out["error"]["message"]  # type: ignore[index]
    with sqlite3.connect(tmp_path / "a.db") as conn:
        assert conn.execute("SELECT id FROM t").fetchall() == [(2,)]  # row 1 rolled back


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"source": {"type": "snowflake", "query": "SELECT 1"},
          "target": {"type": "sqlite", "table": "t"}}, "plugin"),
        ({"source": {"type": "sqlite", "query": "SELECT 1"}, "target": {"type": "sqlite"}},
         "target.table"),
        ({"source": {"type": "sqlite", "query": "SELECT 1 AS a"},
          "target": {"type": "sqlite", "table": "t"}, "mode": "upsert"}, "key"),
    ],
)  # fmt: skip
def test_bad_endpoints_are_clear_errors(
    args: dict[str, object], fragment: str, tmp_path: Path
) -> None:
    out = transfer(args, tmp_path)
    assert out["status"] == "error" and fragment in out["error"]["message"]  # type: ignore[index]


def test_the_compiler_checks_transfer_arguments() -> None:
    def codes(tool: str) -> list[str]:
        src = f"workflow:\n  - step: start\n    tool: {tool}\n"
        return [d.code for d in compile_source(src).reporter.sorted()]

    ok = ("{kind: transfer, source: {type: http, url: 'http://x'}, "
          "target: {type: postgres, auth: pg, table: t, mapping: {a: b}}, chunk_size: 10}")  # fmt: skip
    assert codes(ok) == []
    assert "NOE603" in codes(ok.replace("type: http", "type: mongo"))
    assert "NOE601" in codes(ok.replace("mapping", "maping"))
    assert "NOE602" in codes("{kind: transfer, source: {type: http}}")
    older = ok.replace("type: http", "tool: http").replace("type: postgres", "tool: postgres")
    assert codes(older) == []


def test_a_playbook_transfers_and_reads_back(
    dsn: str, schema: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from noetlc.cli import vm_main

    playbook = tmp_path / "copy.yaml"
    playbook.write_text(
        f"""
workload: {{pg: "{dsn}"}}
workflow:
  - step: start
    tool:
      - {{name: make, kind: sqlite, database: src.db,
          command: "CREATE TABLE s (id INTEGER, label TEXT); INSERT INTO s VALUES (1, 'a'), (2, 'b')"}}
      - {{name: target, kind: postgres, auth: "{{{{ workload.pg }}}}",
          command: "CREATE TABLE {schema}.t (id INT PRIMARY KEY, label TEXT)"}}
      - name: copy
        kind: transfer
        source: {{type: sqlite, database: src.db, query: "SELECT id, label FROM s"}}
        target: {{type: postgres, auth: "{{{{ workload.pg }}}}", table: {schema}.t}}
      - {{name: check, kind: postgres, auth: "{{{{ workload.pg }}}}",
          query: "SELECT count(*) AS n FROM {schema}.t"}}
"""
    )
    code = vm_main.main(["run", str(playbook), "--json", "--quiet", "--db", "memory:"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0, summary
    assert summary["result"]["command_0"]["rows"] == [{"n": 2}]
