"""The `transfer` tool: copy rows from a source to a target in batches of `chunk_size`.

Sources: `postgres` (a server-side cursor in a read transaction), `sqlite` and `duckdb`
(`fetchmany`), each with `query:` and `params:`; `http` (one request through the http tool —
same `auth:`, `headers:`, `params:` — whose JSON answer is the list of rows, or holds it at
`data_path:`). Targets: `postgres`, `sqlite`, `duckdb` (a `table:`), `http` (each batch is
POSTed as a JSON array). Rows are mappings; `mapping: {target column: source field}` (a dotted
path into the row) picks and renames, else every field of a row is a column of the same name.

Database targets write in one transaction, so a failure leaves the table as it was. `mode:
append` inserts; `replace` empties the table first; `upsert` inserts or updates on a conflict of
`key:` columns. Values keep their JSON types: PostgreSQL converts them to the table's column
types itself (one `INSERT ... SELECT FROM jsonb_populate_recordset` per batch); for SQLite and
DuckDB a mapping or list becomes JSON text. Table and column names are quoted identifiers,
never text spliced from data.

The result: `{rows_transferred, batches, source, target, table, mode}`. `snowflake` endpoints
need a plugin (a `ToolUnavailable` error).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

from noetlc.stdlib_tools import aioloop
from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error, jsonable, ok
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.schemas import HttpArgs, TransferArgs, TransferEndpoint

Row = dict[str, Any]


class TransferError(Exception):
    def __init__(self, type_: str, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.type = type_
        self.fields = fields


def run(
    args: TransferArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    source, target = args.source, args.target
    for end in (source, target):
        if end.type == "snowflake":
            return error(
                "ToolUnavailable",
                "transfer endpoints of type snowflake need a plugin that registers the "
                "`snowflake` kind in the `noetlc.tools` entry-point group",
            )
    problem = _check_endpoints(args)
    if problem:
        return error("ToolArgumentError", problem)
    mapping = target.mapping or args.mapping
    key = [target.key] if isinstance(target.key, str) else list(target.key or [])
    if args.mode == "upsert" and not key and target.type != "http":
        return error("ToolArgumentError", "`mode: upsert` needs `target.key:` (conflict columns)")
    writer: _Writer | None = None
    rows = batches = 0
    try:
        writer = _open_writer(target, args.mode, key, ctx, keychain)
        for batch in _read(source, args.chunk_size, ctx, keychain):
            shaped = [_shape(row, mapping) for row in batch]
            if shaped:
                writer.write(shaped)
                rows += len(shaped)
                batches += 1
        writer.commit()
    except TransferError as exc:
        if writer is not None:
            writer.abort()
        return error(exc.type, str(exc), rows_written_before_failure=rows, **exc.fields)
    except Exception as exc:  # driver errors: the outcome says which side failed
        if writer is not None:
            writer.abort()
        return error(type(exc).__name__, str(exc), rows_written_before_failure=rows)
    return ok(
        {
            "rows_transferred": rows,
            "batches": batches,
            "source": source.type,
            "target": target.type,
            "table": target.table,
            "mode": args.mode,
        }
    )


def _check_endpoints(args: TransferArgs) -> str | None:
    source, target = args.source, args.target
    if source.type == "http" and not source.url:
        return "an http source needs `source.url:`"
    if source.type != "http" and not source.query:
        return f"a {source.type} source needs `source.query:`"
    if target.type == "http" and not target.url:
        return "an http target needs `target.url:`"
    if target.type != "http" and not target.table:
        return f"a {target.type} target needs `target.table:`"
    if source.type == "postgres" and source.auth is None:
        return "a postgres source needs `source.auth:`"
    if target.type == "postgres" and target.auth is None:
        return "a postgres target needs `target.auth:`"
    return None


def _shape(row: Any, mapping: dict[str, str] | None) -> Row:
    if not isinstance(row, dict):
        raise TransferError("TransferError", f"a source row is not a mapping: {row!r:.80}")
    if not mapping:
        return row
    return {column: _dig(row, path) for column, path in mapping.items()}


def _dig(row: Row, path: str) -> Any:
    if path in row:
        return row[path]
    value: Any = row
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


# --------------------------------------------------------------------------- readers


def _read(
    source: TransferEndpoint, chunk: int, ctx: ToolContext, keychain: Keychain
) -> Iterator[list[Row]]:
    if source.type == "http":
        yield from _chunks(_http_rows(source, ctx, keychain), chunk)
    elif source.type == "postgres":
        yield from _pg_read(source, chunk, keychain)
    else:
        yield from _dbapi_read(source, chunk, ctx)


def _chunks(rows: list[Any], chunk: int) -> Iterator[list[Any]]:
    for start in range(0, len(rows), chunk):
        yield rows[start : start + chunk]


def _http_rows(source: TransferEndpoint, ctx: ToolContext, keychain: Keychain) -> list[Any]:
    from noetlc.stdlib_tools import http_tool

    request = HttpArgs.model_validate(
        {
            "url": source.url,
            "method": source.method or "GET",
            "headers": source.headers,
            "params": source.params if isinstance(source.params, dict) else None,
            "auth": source.auth,
            "timeout": source.timeout,
        }
    )
    outcome = http_tool.run(request, {}, ctx, keychain)
    if outcome["status"] != "ok":
        err = outcome.get("error") or {}
        raise TransferError(
            "HttpError", f"the http source failed: {err.get('message')}", http=outcome.get("http")
        )
    envelope = outcome.get("result")
    body = envelope.get("data") if isinstance(envelope, dict) else None  # the response body
    if source.data_path:
        for part in source.data_path.split("."):
            body = body.get(part) if isinstance(body, dict) else None
    if isinstance(body, dict):
        body = [body]
    if not isinstance(body, list):
        where = f" at `{source.data_path}`" if source.data_path else ""
        raise TransferError(
            "TransferError", f"the http source's answer{where} is not a list of rows"
        )
    return body


def _pg_read(source: TransferEndpoint, chunk: int, keychain: Keychain) -> Iterator[list[Row]]:
    import asyncpg

    from noetlc.stdlib_tools.postgres_tool import connection_of

    connect = connection_of(source.auth, keychain)
    params = list(source.params) if isinstance(source.params, list) else []
    conn: asyncpg.Connection = aioloop.run(asyncpg.connect(**connect), source.timeout or 30)
    try:
        transaction = conn.transaction(readonly=True)
        aioloop.run(transaction.start())
        cursor = aioloop.run(_open_cursor(conn, str(source.query), params))
        while True:
            records = aioloop.run(cursor.fetch(chunk), source.timeout)
            if not records:
                break
            yield [jsonable(dict(r)) for r in records]
        aioloop.run(transaction.commit())
    finally:
        aioloop.run(conn.close())


async def _open_cursor(conn: Any, query: str, params: list[Any]) -> Any:
    return await conn.cursor(query, *params)


def _dbapi_read(source: TransferEndpoint, chunk: int, ctx: ToolContext) -> Iterator[list[Row]]:
    conn = _dbapi_connect(source, ctx)
    try:
        params = source.params
        cursor = (
            conn.execute(str(source.query), params)
            if params is not None
            else conn.execute(str(source.query))
        )
        columns = [d[0] for d in cursor.description or ()]
        while True:
            records = cursor.fetchmany(chunk)
            if not records:
                break
            yield [jsonable(dict(zip(columns, r))) for r in records]
    finally:
        conn.close()


def _dbapi_connect(end: TransferEndpoint, ctx: ToolContext) -> Any:
    from noetlc.stdlib_tools.sqlite_tool import database_path

    path = database_path(end.database or ":memory:", ctx.workdir)
    if end.type == "sqlite":
        import sqlite3

        return sqlite3.connect(path, isolation_level=None)
    from noetlc.stdlib_tools.duckdb_tool import INSTALL_HINT, load_duckdb

    duckdb = load_duckdb()
    if duckdb is None:
        raise TransferError("ToolUnavailable", "duckdb endpoints need the duckdb package",
                            hint=INSTALL_HINT)  # fmt: skip
    return duckdb.connect(path)


# --------------------------------------------------------------------------- writers


def _quote(name: str) -> str:
    """A (possibly schema-qualified) identifier, quoted part by part."""
    parts = name.split(".") if not name.startswith('"') else [name]
    out = []
    for part in parts:
        if part.startswith('"') and part.endswith('"') and len(part) > 1:
            out.append(part)
        else:
            out.append('"' + part.replace('"', '""') + '"')
    return ".".join(out)


def _columns(rows: list[Row]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


class _Writer(ABC):
    @abstractmethod
    def write(self, rows: list[Row]) -> None:
        """Send one batch of rows to the target."""

    def commit(self) -> None:  # noqa: B027 (an optional hook: nothing to do by default)
        """Make the written rows visible (database targets: the one transaction)."""

    def abort(self) -> None:  # noqa: B027 (an optional hook: nothing to do by default)
        """Undo what was written, where the target can."""


def _open_writer(
    target: TransferEndpoint, mode: str, key: list[str], ctx: ToolContext, keychain: Keychain
) -> _Writer:
    if target.type == "http":
        return _HttpWriter(target, ctx, keychain)
    if target.type == "postgres":
        return _PgWriter(target, mode, key, keychain)
    return _DbapiWriter(target, mode, key, ctx)


def _conflict_clause(columns: list[str], key: list[str], excluded: str) -> str:
    updates = [c for c in columns if c not in key]
    target = ", ".join(_quote(k) for k in key)
    if not updates:
        return f" ON CONFLICT ({target}) DO NOTHING"
    sets = ", ".join(f"{_quote(c)} = {excluded}.{_quote(c)}" for c in updates)
    return f" ON CONFLICT ({target}) DO UPDATE SET {sets}"


class _HttpWriter(_Writer):
    def __init__(self, target: TransferEndpoint, ctx: ToolContext, keychain: Keychain) -> None:
        self.target, self.ctx, self.keychain = target, ctx, keychain

    def write(self, rows: list[Row]) -> None:
        from noetlc.stdlib_tools import http_tool

        request = HttpArgs.model_validate(
            {
                "url": self.target.url,
                "method": self.target.method or "POST",
                "headers": self.target.headers,
                "auth": self.target.auth,
                "json": rows,
                "timeout": self.target.timeout,
            }
        )
        outcome = http_tool.run(request, {}, self.ctx, self.keychain)
        if outcome["status"] != "ok":
            err = outcome.get("error") or {}
            raise TransferError(
                "HttpError",
                f"the http target refused a batch: {err.get('message')}",
                http=outcome.get("http"),
            )


class _PgWriter(_Writer):
    def __init__(
        self, target: TransferEndpoint, mode: str, key: list[str], keychain: Keychain
    ) -> None:
        import asyncpg

        from noetlc.stdlib_tools.postgres_tool import connection_of

        self.table = _quote(str(target.table))
        self.mode, self.key, self.timeout = mode, key, target.timeout
        connect = connection_of(target.auth, keychain)
        self.conn: asyncpg.Connection = aioloop.run(asyncpg.connect(**connect), 30)
        self.transaction = self.conn.transaction()
        aioloop.run(self.transaction.start())
        if mode == "replace":
            aioloop.run(self.conn.execute(f"DELETE FROM {self.table}"), self.timeout)

    def write(self, rows: list[Row]) -> None:
        columns = _columns(rows)
        names = ", ".join(_quote(c) for c in columns)
        sql = (
            f"INSERT INTO {self.table} ({names}) SELECT {names} "
            f"FROM jsonb_populate_recordset(NULL::{self.table}, $1::jsonb)"
        )
        if self.mode == "upsert":
            sql += _conflict_clause(columns, self.key, "EXCLUDED")
        payload = json.dumps(rows, default=str)
        aioloop.run(self.conn.execute(sql, payload), self.timeout)

    def commit(self) -> None:
        try:
            aioloop.run(self.transaction.commit())
        finally:
            aioloop.run(self.conn.close())

    def abort(self) -> None:
        try:
            if not self.conn.is_closed():
                aioloop.run(self.transaction.rollback())
        except Exception:  # the connection may be gone: nothing was committed either way
            pass
        finally:
            if not self.conn.is_closed():
                aioloop.run(self.conn.close())


class _DbapiWriter(_Writer):
    def __init__(self, target: TransferEndpoint, mode: str, key: list[str], ctx: ToolContext):
        self.conn = _dbapi_connect(target, ctx)
        self.table = _quote(str(target.table))
        self.mode, self.key, self.kind = mode, key, target.type
        self.conn.execute("BEGIN TRANSACTION" if self.kind == "duckdb" else "BEGIN")
        if mode == "replace":
            self.conn.execute(f"DELETE FROM {self.table}")

    def write(self, rows: list[Row]) -> None:
        columns = _columns(rows)
        names = ", ".join(_quote(c) for c in columns)
        marks = ", ".join("?" for _ in columns)
        sql = f"INSERT INTO {self.table} ({names}) VALUES ({marks})"
        if self.mode == "upsert":
            sql += _conflict_clause(columns, self.key, "excluded")
        values = [tuple(_scalar(row.get(c)) for c in columns) for row in rows]
        self.conn.executemany(sql, values)

    def commit(self) -> None:
        try:
            self.conn.execute("COMMIT")
        finally:
            self.conn.close()

    def abort(self) -> None:
        try:
            self.conn.execute("ROLLBACK")
        except Exception:  # no transaction left to roll back
            pass
        finally:
            self.conn.close()


def _scalar(value: Any) -> Any:
    if isinstance(value, dict | list):
        return json.dumps(value)
    return value
