"""The `postgres` tool: SQL with parameters through asyncpg, on the tools' background loop.

`auth:` (or `connection:`) names a keychain entry — whose value is a DSN or a mapping of
connection fields (`host`, `port`, `user`, `password`, `database`, or NoETL's `db_host`,
`db_port`, `db_user`, `db_password`, `db_name`) — or is a `postgresql://` DSN itself. Values go
in `params:` as `$1, $2, ...`: the tool never builds SQL from data (no injection through values).

A single statement is prepared and run with the parameters; a script of several statements
(no parameters) runs statement by statement in one transaction. The result is the last
statement's `rows` (a list of mappings, JSON-safe values), `columns`, `rowcount` (rows returned
or affected; `row_count` is NoETL's spelling) and the command `status` (`INSERT 0 3`).
Every statement's own result is also there as `command_0`, `command_1`, ... (NoETL's shape:
`{{ save.command_0.rows[0].id }}`). `outcome.pg` is `{code, sqlstate}`: `00000` on success, PostgreSQL's SQLSTATE on a server error,
`08001` when no connection could be made. Pools are cached per connection and closed at exit.
A cancel of the action cancels the running statement on the server (`Cancelled`, `57014`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg

from noetlc.stdlib_tools import aioloop
from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error, jsonable, ok
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.schemas import PgPool, PostgresArgs
from noetlc.stdlib_tools.script_source import ScriptError, load
from noetlc.stdlib_tools.sql_split import split_statements, with_commands

CONNECT_TIMEOUT = 10.0
POOL_MAX = 4
# serialization failure, deadlock, and the connection / operator-intervention classes
RETRYABLE = ("40001", "40P01", "08", "57P0")
_FIELDS = {
    "host": ("host", "db_host", "hostname"),
    "port": ("port", "db_port"),
    "user": ("user", "username", "db_user"),
    "password": ("password", "db_password"),
    "database": ("database", "dbname", "db_name", "db"),
}

_pools: dict[str, asyncpg.Pool] = {}
_pool_locks: dict[str, asyncio.Lock] = {}


class ConnectionSpecError(Exception):
    """`auth:` does not describe a connection."""


def run(
    args: PostgresArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    try:
        connect = connection_of(args.auth, keychain)
    except ConnectionSpecError as exc:
        return error("ToolArgumentError", str(exc))
    connect = {**connect, **fields_of(args.connect_with or {})}
    sql = args.query or ""
    if args.script is not None:
        try:
            sql = load(args.script, ctx)
        except ScriptError as exc:
            return error("ScriptError", str(exc))
    statements = split_statements(sql)
    if args.params and len(statements) > 1:
        return error(
            "ToolArgumentError",
            f"`params:` need a single statement; the SQL has {len(statements)}",
        )
    timeout = args.timeout if args.timeout is not None else _number(spec.get("timeout"))
    try:
        result = aioloop.run(
            _execute(connect, sql, statements, list(args.params or []), args.pool),
            timeout,
            ctx.cancelled,
        )
    except aioloop.Cancelled:
        # the statement is cancelled on the server: its connection goes back to the pool
        return _pg(error("Cancelled", "the statement was cancelled"), "57014")
    except asyncpg.PostgresError as exc:
        return _server_error(exc)
    except TimeoutError as exc:
        outcome = error("Timeout", f"the statement took too long: {exc}", retryable=True)
        return _pg(outcome, "57014")  # query_canceled: we gave up on it
    except (OSError, asyncpg.exceptions.ConnectionDoesNotExistError) as exc:
        message = f"cannot connect to PostgreSQL: {exc}"
        return _pg(error("ConnectionError", message, retryable=True), "08001")
    except asyncpg.InterfaceError as exc:
        return _pg(error(type(exc).__name__, str(exc)), None)
    return _pg(ok(result), "00000")


def connection_of(auth: str | dict[str, Any] | None, keychain: Keychain) -> dict[str, Any]:
    """asyncpg connect arguments from `auth:` (a DSN, a keychain entry, or fields)."""
    if isinstance(auth, str) and auth.startswith(("postgres://", "postgresql://")):
        return {"dsn": auth}
    value: Any = keychain.resolve(auth) if isinstance(auth, str) else auth
    if isinstance(value, dict):
        ref = value.get("credential") or value.get("key")
        if isinstance(ref, str) and not _has_fields(value):
            value = keychain.resolve(ref)
    if isinstance(value, str) and value.startswith(("postgres://", "postgresql://")):
        return {"dsn": value}
    if isinstance(value, dict):
        dsn = value.get("dsn") or value.get("url")
        if isinstance(dsn, str):
            return {"dsn": dsn}
        out = fields_of(value)
        if out:
            return out
    named = f"keychain entry `{auth}`" if isinstance(auth, str) else "`auth:`"
    raise ConnectionSpecError(
        f"{named} is not a PostgreSQL connection: give a postgresql:// DSN or a mapping with "
        "host, port, user, password and database"
    )


def fields_of(value: dict[str, Any]) -> dict[str, Any]:
    """asyncpg's connect fields from a mapping in any of NoETL's spellings (`db_name`, ...);
    beside a `dsn` they override its parts."""
    out: dict[str, Any] = {}
    for field, spellings in _FIELDS.items():
        found = next((value[s] for s in spellings if value.get(s) is not None), None)
        if found is not None:
            out[field] = int(found) if field == "port" else str(found)
    return out


def _has_fields(value: dict[str, Any]) -> bool:
    return any(s in value for spellings in _FIELDS.values() for s in spellings) or "dsn" in value


async def _execute(
    connect: dict[str, Any],
    sql: str,
    statements: list[str],
    params: list[Any],
    settings: PgPool | None = None,
) -> dict[str, Any]:
    pool, key = await _pool(connect, settings)
    acquire_timeout = settings.timeout if settings is not None else None
    try:
        conn = await pool.acquire(timeout=acquire_timeout)
    except OSError:
        await _close(key)  # do not keep pools for servers that are not there
        raise
    try:
        return await _run(conn, sql, statements, params)
    finally:
        await pool.release(conn)


async def _run(
    conn: asyncpg.Connection, sql: str, statements: list[str], params: list[Any]
) -> dict[str, Any]:
    if len(statements) <= 1:
        stmt = await conn.prepare(sql)
        rows = await stmt.fetch(*params)
        return with_commands([_result(stmt, rows, 1)])
    results = []
    async with conn.transaction():
        for text in statements:
            stmt = await conn.prepare(text)
            rows = await stmt.fetch()
            results.append(_result(stmt, rows, 1))
    return with_commands(results)


def _result(stmt: Any, rows: list[asyncpg.Record], count: int) -> dict[str, Any]:
    status = stmt.get_statusmsg() or ""
    words = status.split()
    affected = int(words[-1]) if words and words[-1].isdigit() else len(rows)
    return {
        "rows": [jsonable(dict(row)) for row in rows],
        "columns": [attr.name for attr in stmt.get_attributes()],
        "rowcount": affected,
        "row_count": affected,
        "status": status,
        "statements": count,
    }


def _key(connect: dict[str, Any], settings: PgPool | None = None) -> str:
    """One pool per connection and pool settings: tasks naming the same `pool:` share it."""
    shape = settings.model_dump(exclude_none=True) if settings is not None else {}
    return json.dumps([connect, shape], sort_keys=True)


async def _pool(connect: dict[str, Any], settings: PgPool | None) -> tuple[asyncpg.Pool, str]:
    key = _key(connect, settings)
    pool = _pools.get(key)
    if pool is not None:
        return pool, key
    lock = _pool_locks.setdefault(key, asyncio.Lock())
    async with lock:
        pool = _pools.get(key)
        if pool is None:
            max_size = settings.max_size if settings and settings.max_size else POOL_MAX
            min_size = min(settings.min_size or 0, max_size) if settings else 0
            pool = await asyncpg.create_pool(
                **connect,
                min_size=min_size,
                max_size=max_size,
                timeout=CONNECT_TIMEOUT,
                init=_init,
            )
            _pools[key] = pool
            aioloop.on_close(lambda: _close(key))
    return pool, key


async def _close(key: str) -> None:
    pool = _pools.pop(key, None)
    _pool_locks.pop(key, None)
    if pool is not None:
        await pool.close()


async def _init(conn: asyncpg.Connection) -> None:
    # json/jsonb as Python values both ways (asyncpg's default is text)
    for name in ("json", "jsonb"):
        await conn.set_type_codec(name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


def _server_error(exc: asyncpg.PostgresError) -> dict[str, Any]:
    sqlstate = getattr(exc, "sqlstate", None)
    outcome = error(
        type(exc).__name__,
        str(exc),
        retryable=bool(sqlstate) and str(sqlstate).startswith(RETRYABLE),
        detail=getattr(exc, "detail", None),
        hint=getattr(exc, "hint", None),
        position=_position(exc),
    )
    return _pg(outcome, sqlstate)


def _position(exc: asyncpg.PostgresError) -> int | None:
    """Where in the statement the server found the error (1-based character), if it said."""
    position = getattr(exc, "position", None)
    return int(position) if isinstance(position, str) and position.isdigit() else None


def _pg(outcome: dict[str, Any], sqlstate: str | None) -> dict[str, Any]:
    outcome["pg"] = {"code": sqlstate, "sqlstate": sqlstate}
    return outcome


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
