"""`noetl query SQL` (`POST /api/postgres/execute`): one read-only statement against the
service's own store, bounded in time and rows.

A read-only transaction (PostgreSQL) or a read-only connection (SQLite) stops writes to the
store, not what else SQL can reach: a superuser's read-only transaction still runs `COPY ...
TO PROGRAM` (a shell command as the database's OS user), `pg_read_file`, `lo_export` and
`pg_terminate_backend`, and SQLite's `ATTACH` creates a file anywhere the service can write.
So, besides the read-only mode:

* SQLite: an authorizer allows reading tables and calling functions, and nothing else (no
  ATTACH, no PRAGMA that sets, no VACUUM INTO, no `load_extension`).
* PostgreSQL: the statement must begin with SELECT, WITH, VALUES, TABLE, EXPLAIN or SHOW;
  functions that change the role or run SQL text (`set_config`, `query_to_xml`, `ts_stat`,
  `ts_rewrite`, `dblink`), that reach server files or other sessions (`pg_read_file`,
  `pg_ls_dir`, `lo_*`, `pg_terminate_backend`, advisory locks...) are refused by name, and
  `U&"..."` identifiers (which could spell those names otherwise) are refused. A store role
  with a superuser's powers runs the statement as `pg_read_all_data` (PostgreSQL 14+: reads
  every table, nothing else); without that role, such a store refuses `query`.
"""

from __future__ import annotations

import re
import sqlite3
import time
from typing import Any

from noetlc.service.errors import ApiError

QUERY_TIMEOUT = 5.0  # seconds
QUERY_ROWS = 1000
QUERY_REFUSED = "NOE883"

Rows = tuple[list[str], list[list[Any]], bool]


def refused(message: str) -> ApiError:
    return ApiError(
        400,
        QUERY_REFUSED,
        message,
        "send one read-only SELECT; narrow it with WHERE and LIMIT",
    )


# ------------------------------------------------------------------------------- SQLite

# what a SELECT needs: its reads, its function calls, a recursive CTE
_SQLITE_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, 33}
_SQLITE_PRAGMAS = {"table_info", "table_xinfo", "table_list", "index_list", "index_info"}
_SQLITE_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}


def _sqlite_authorizer(action: int, arg1: str | None, arg2: str | None, *_: object) -> int:
    if action == sqlite3.SQLITE_FUNCTION:
        denied = (arg2 or "").lower() in _SQLITE_FUNCTIONS
        return sqlite3.SQLITE_DENY if denied else sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master":
        # asked while a table-valued pragma declares its columns; the connection is
        # read-only (mode=ro, query_only), so nothing is written either way
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA:  # reading the schema, never setting anything
        ok = (arg1 or "").lower() in _SQLITE_PRAGMAS
        return sqlite3.SQLITE_OK if ok else sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK if action in _SQLITE_ALLOWED else sqlite3.SQLITE_DENY


def sqlite_query(path: str, sql: str) -> Rows:
    uri = f"file:{path}?mode=ro"
    db = sqlite3.connect(uri, uri=True, timeout=QUERY_TIMEOUT)
    deadline = time.monotonic() + QUERY_TIMEOUT
    db.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        db.execute("PRAGMA query_only = ON")
        db.set_authorizer(_sqlite_authorizer)
        cursor = db.execute(sql)
        if cursor.description is None:
            return [], [], False
        names = [c[0] for c in cursor.description]
        rows = cursor.fetchmany(QUERY_ROWS + 1)
    except sqlite3.Warning as exc:  # more than one statement
        raise refused(f"the query was refused: {exc}") from None
    except sqlite3.Error as exc:
        why = "it ran past the statement timeout" if time.monotonic() > deadline else str(exc)
        if why in ("not authorized", "authorization denied"):  # the authorizer said no
            why = "only reading the store's tables runs here (no writes, ATTACH or PRAGMA)"
        raise refused(f"the query was refused: {why}") from None
    finally:
        db.close()
    return names, [list(r) for r in rows[:QUERY_ROWS]], len(rows) > QUERY_ROWS


# --------------------------------------------------------------------------- PostgreSQL

_PG_FIRST = {"select", "with", "values", "table", "explain", "show"}
_PG_REFUSED_NAMES = re.compile(
    r"\b(set_config|query_to_xml\w*|cursor_to_xml\w*|ts_stat|ts_rewrite|dblink\w*|lo_\w+"
    r"|pg_read_\w*file|pg_ls_\w+|pg_stat_file|pg_file_\w+|pg_logdir_ls"
    r"|pg_terminate_backend|pg_cancel_backend|pg_reload_conf|pg_rotate_logfile\w*"
    r"|pg_promote|pg_switch_wal|pg_create_\w+|pg_drop_\w+|pg_log_backend_memory_contexts"
    r"|pg_advisory\w*|pg_try_advisory\w*|pg_notify)\s*\("
)
_COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)
# a superuser's powers that a read-only transaction does not take away
_POWERS = """
SELECT r.rolsuper
    OR pg_has_role(current_user, 'pg_execute_server_program', 'MEMBER')
    OR pg_has_role(current_user, 'pg_read_server_files', 'MEMBER')
    OR pg_has_role(current_user, 'pg_write_server_files', 'MEMBER') AS powerful,
  to_regrole('pg_read_all_data') IS NOT NULL
    AND pg_has_role(current_user, 'pg_read_all_data', 'MEMBER') AS can_drop
FROM pg_roles r WHERE r.rolname = current_user
"""


def pg_refusal(sql: str) -> str | None:
    """Why this statement is not run, or None. Names are compared without their quotes and
    case, so `"SET_CONFIG"`-style spellings of a refused function are caught too."""
    text = _COMMENTS.sub(" ", sql).lower()
    first = re.match(r"[\s(]*([a-z]+)", text)
    if not first or first.group(1) not in _PG_FIRST:
        word = first.group(1).upper() if first else "that"
        return f"only SELECT, WITH, VALUES, TABLE, EXPLAIN and SHOW run here, not {word}"
    if re.search(r"\bu&['\"]", text):
        return "U& escapes are not accepted here"
    named = _PG_REFUSED_NAMES.search(text.replace('"', ""))
    if named:
        return f"{named.group(1)}() reaches beyond reading the store"
    return None


async def pg_query(url: str, sql: str, schema: str | None) -> Rows:
    import asyncpg

    from noetlc.runtime.postgres.connect import connect, parse_url

    why = pg_refusal(sql)
    if why:
        raise refused(f"the query was refused: {why}")
    parsed = parse_url(url)
    conn = await connect(parsed)
    try:
        async with conn.transaction(readonly=True):
            await conn.execute(f"SET LOCAL statement_timeout = {int(QUERY_TIMEOUT * 1000)}")
            path = [parsed.schema] + ([schema] if schema and schema != parsed.schema else [])
            await conn.execute(
                "SELECT set_config('search_path', $1, true)",
                ", ".join('"' + p.replace('"', '""') + '"' for p in path),
            )
            powers = await conn.fetchrow(_POWERS)
            if powers and powers["powerful"]:
                if not powers["can_drop"]:
                    raise refused(
                        "the store's role can run programs and read server files, and this"
                        " server has no pg_read_all_data role to query as (PostgreSQL 14+);"
                        " give the service a role without those powers"
                    )
                await conn.execute("SET LOCAL ROLE pg_read_all_data")
            try:
                statement = await conn.prepare(sql)
                names = [a.name for a in statement.get_attributes()]
                records = await statement.fetch()
            except asyncpg.PostgresError as exc:
                raise refused(f"the query was refused: {exc}") from None
    finally:
        await conn.close()
    rows = [list(r) for r in records[: QUERY_ROWS + 1]]
    return names, rows[:QUERY_ROWS], len(rows) > QUERY_ROWS
