"""The `sqlite` tool: SQL with parameters on a database file (Python's sqlite3).

`database:` (or `path:`/`db:`/`file:`) is relative to the playbook's folder (`:memory:` by
default); `params:` is a list for `?` or a mapping for `:name`. One statement runs with the
parameters; a script of several statements (no parameters) runs statement by statement in one
transaction. The result is the last statement's `rows` (mappings), `columns`, `rowcount` (rows
returned or changed; `row_count` too) and `statements`. `timeout:` (else `spec.timeout`)
bounds both the wait for a locked database and the statement itself (it is interrupted).
`outcome.sqlite.code` is SQLite's error name (`SQLITE_CONSTRAINT_UNIQUE`, ...) on errors.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error, ok
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.schemas import SqliteArgs
from noetlc.stdlib_tools.sql_split import rows_result, run_script, split_statements

DEFAULT_TIMEOUT = 30.0
PROGRESS_STEPS = 10_000  # SQLite VM instructions between deadline checks
RETRYABLE = ("SQLITE_BUSY", "SQLITE_LOCKED")


def database_path(database: str, workdir: Path) -> str:
    if database == ":memory:" or database.startswith("file:"):
        return database
    path = Path(database).expanduser()
    return str(path if path.is_absolute() else workdir / path)


def run(
    args: SqliteArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    statements = split_statements(args.query or "")
    if args.params and len(statements) > 1:
        return error(
            "ToolArgumentError",
            f"`params:` need a single statement; the SQL has {len(statements)}",
        )
    spec_timeout = spec.get("timeout")
    timeout = args.timeout if args.timeout is not None else spec_timeout
    seconds = float(timeout) if isinstance(timeout, int | float) else DEFAULT_TIMEOUT
    path = database_path(args.database, ctx.workdir)
    try:
        conn = sqlite3.connect(
            path, timeout=seconds, isolation_level=None, uri=path.startswith("file:")
        )
    except sqlite3.Error as exc:
        return _error(exc, f"cannot open {path}: ")
    deadline = time.monotonic() + seconds
    cancelled = ctx.cancelled
    if cancelled is None:
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), PROGRESS_STEPS)
    else:  # a cancel interrupts the statement too (the script's transaction is rolled back)
        conn.set_progress_handler(
            lambda: int(time.monotonic() > deadline or cancelled()), PROGRESS_STEPS
        )
    try:
        result = run_script(conn, statements, args.query or "", args.params, _execute, "BEGIN")
    except sqlite3.Error as exc:
        if cancelled is not None and cancelled():
            return error("Cancelled", "the statement was cancelled")
        if time.monotonic() > deadline:
            return error("Timeout", f"the statement did not finish within {seconds:g} s")
        return _error(exc, "")
    finally:
        conn.close()
    return ok(result)


def _execute(conn: sqlite3.Connection, sql: str, params: Any) -> dict[str, Any]:
    cursor = conn.execute(sql, params if params is not None else ())
    rows = cursor.fetchall()
    columns = [d[0] for d in cursor.description or ()]
    count = cursor.rowcount if cursor.rowcount >= 0 else len(rows)
    return rows_result(columns, rows, count)


def _error(exc: sqlite3.Error, prefix: str) -> dict[str, Any]:
    name = getattr(exc, "sqlite_errorname", None)
    outcome = error(
        type(exc).__name__,
        f"{prefix}{exc}",
        retryable=bool(name) and str(name).startswith(RETRYABLE),
    )
    outcome["sqlite"] = {"code": name}
    return outcome
