"""The `duckdb` tool: SQL with parameters on a DuckDB database (an optional dependency).

duckdb is imported on first use; without it the outcome is a `ToolUnavailable` error with the
hint `pip install duckdb` (or `pip install 'noetlc[duckdb]'`). `database:` is relative to the
playbook's folder (`:memory:` by default, a fresh database per call); `params:` is a list for `?`
or a mapping for `$name`. One statement runs with the parameters; a script runs statement by
statement in one transaction. The result is the last statement's `rows`, `columns`,
`rowcount` (`row_count` too) and `statements`.
"""

from __future__ import annotations

import importlib
from typing import Any

from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error, ok
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.schemas import DuckdbArgs
from noetlc.stdlib_tools.sql_split import rows_result, run_script, split_statements
from noetlc.stdlib_tools.sqlite_tool import database_path

CHANGES = frozenset({"insert", "update", "delete", "create", "drop", "alter", "copy", "merge"})
INSTALL_HINT = "pip install duckdb  (or: pip install 'noetlc[duckdb]')"


def load_duckdb() -> Any | None:
    try:
        return importlib.import_module("duckdb")
    except ImportError:
        return None


def run(
    args: DuckdbArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    duckdb = load_duckdb()
    if duckdb is None:
        return error(
            "ToolUnavailable", "the duckdb tool needs the duckdb package", hint=INSTALL_HINT
        )
    statements = split_statements(args.query or "")
    if args.params and len(statements) > 1:
        return error(
            "ToolArgumentError",
            f"`params:` need a single statement; the SQL has {len(statements)}",
        )
    path = database_path(args.database, ctx.workdir)
    try:
        conn = duckdb.connect(path)
    except duckdb.Error as exc:
        return error(type(exc).__name__, f"cannot open {path}: {exc}")
    try:
        result = run_script(
            conn, statements, args.query or "", args.params, _execute, "BEGIN TRANSACTION"
        )
    except duckdb.Error as exc:
        return error(type(exc).__name__, str(exc))
    finally:
        conn.close()
    return ok(result)


def _execute(conn: Any, sql: str, params: Any) -> dict[str, Any]:
    cursor = conn.execute(sql, params) if params is not None else conn.execute(sql)
    columns = [d[0] for d in cursor.description or ()]
    rows = cursor.fetchall() if columns else []
    count = len(rows)
    first = sql.lstrip().split(None, 1)[0].lower() if sql.strip() else ""
    if columns == ["Count"] and first in CHANGES:
        # DuckDB reports the rows a change touched as a one-row `Count` result
        count = int(rows[0][0]) if rows else 0
        rows = []
    return rows_result(columns, rows, count)
