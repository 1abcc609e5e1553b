"""The `duckdb` tool: SQL with parameters on a DuckDB database (an optional dependency).

duckdb is imported on first use; without it the outcome is a `ToolUnavailable` error with the
hint `pip install duckdb` (or `pip install 'noetlc[duckdb]'`). `database:` is relative to the
playbook's folder (`:memory:` by default, a fresh database per call); `params:` is a list for `?`
or a mapping for `$name`. One statement runs with the parameters; a script runs statement by
statement in one transaction. The result is the last statement's `rows`, `columns`,
`rowcount` (`row_count` too) and `statements`. `commands:` is NoETL's name for the SQL too.

`auth: {name: {tool: postgres|hmac|s3|gcs, key: keychain entry, scope}}` makes each entry a
DuckDB secret called `name` before the SQL runs (`CREATE OR REPLACE TEMPORARY SECRET`), so the
SQL can `ATTACH '' AS name (TYPE postgres, SECRET name)` or read `gs://`/`s3://` paths. A
postgres entry's value is read as the postgres tool reads it (a DSN or connection fields); an
hmac entry's value has `key_id` and `secret` (and `region`, `endpoint`), and is a GCS secret
when its scope starts with `gs://`, else S3. A string `auth:` is one entry of that name whose
value says its `tool` (or `type`). DuckDB loads the extension a secret needs (postgres,
httpfs) itself; where it cannot, the task fails with DuckDB's error.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable
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
    try:
        secrets = secret_statements(args.auth, keychain)
    except SecretSpecError as exc:
        return error("ToolArgumentError", str(exc))
    path = database_path(args.database, ctx.workdir)
    try:
        conn = duckdb.connect(path)
    except duckdb.Error as exc:
        return error(type(exc).__name__, f"cannot open {path}: {exc}")
    done = threading.Event()
    if ctx.cancelled is not None:
        # a cancel interrupts the running statement (the script's transaction is rolled back)
        threading.Thread(
            target=_interrupt_on_cancel, args=(conn, ctx.cancelled, done), daemon=True
        ).start()
    try:
        for statement in secrets:
            conn.execute(statement)
        result = run_script(
            conn, statements, args.query or "", args.params, _execute, "BEGIN TRANSACTION"
        )
    except duckdb.Error as exc:
        if ctx.cancelled is not None and ctx.cancelled():
            return error("Cancelled", "the statement was cancelled")
        return error(type(exc).__name__, str(exc))
    finally:
        done.set()
        conn.close()
    return ok(result)


CANCEL_POLL = 0.1  # seconds between looks at the cancel flag


def _interrupt_on_cancel(conn: Any, cancelled: Callable[[], bool], done: threading.Event) -> None:
    while not done.wait(CANCEL_POLL):
        if cancelled():
            with contextlib.suppress(Exception):  # the call may have ended in between
                conn.interrupt()
            return


class SecretSpecError(Exception):
    """An `auth:` entry that does not describe a DuckDB secret."""


def _literal(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "'" + str(value).replace("'", "''") + "'"
    return str(value)


def _ident(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise SecretSpecError(f"`{name}` cannot name a DuckDB secret (letters, digits and _)")
    return name


def secret_statements(auth: dict[str, Any] | str | None, keychain: Keychain) -> list[str]:
    """The `CREATE SECRET` statements of `auth:` (values from the keychain, quoted literals)."""
    if auth is None:
        return []
    entries: dict[str, Any] = {auth: {"key": auth}} if isinstance(auth, str) else auth
    out = []
    for name, spec in entries.items():
        if not isinstance(spec, dict):
            raise SecretSpecError(f"`auth.{name}` must be a mapping {{tool, key}}")
        ref = spec.get("key") or spec.get("credential")
        value: Any = keychain.resolve(ref) if isinstance(ref, str) else spec
        tool = spec.get("tool") or spec.get("type")
        if tool is None and isinstance(value, dict):
            tool = value.get("tool") or value.get("type")
        fields = _secret_fields(str(tool), value, spec, name, keychain)
        body = ", ".join(f"{k} {_literal(v)}" for k, v in fields.items() if v is not None)
        out.append(f"CREATE OR REPLACE TEMPORARY SECRET {_ident(str(name))} ({body})")
    return out


def _secret_fields(
    tool: str, value: Any, spec: dict[str, Any], name: str, keychain: Keychain
) -> dict[str, Any]:
    if tool in ("postgres", "postgresql"):
        from noetlc.stdlib_tools.postgres_tool import ConnectionSpecError, connection_of

        try:
            conn = connection_of(value if isinstance(value, dict | str) else None, keychain)
        except ConnectionSpecError as exc:
            raise SecretSpecError(f"`auth.{name}`: {exc}") from None
        if "dsn" in conn:
            from urllib.parse import unquote, urlsplit

            url = urlsplit(conn["dsn"])
            conn = {
                "host": url.hostname,
                "port": url.port,
                "user": unquote(url.username or "") or None,
                "password": unquote(url.password or "") or None,
                "database": url.path.lstrip("/") or None,
            }
        return {
            "TYPE": "postgres",
            "HOST": conn.get("host"),
            "PORT": conn.get("port"),
            "DATABASE": conn.get("database"),
            "USER": conn.get("user"),
            "PASSWORD": conn.get("password"),
        }
    if tool in ("hmac", "s3", "gcs"):
        if not isinstance(value, dict):
            raise SecretSpecError(f"`auth.{name}`: an hmac credential is a mapping with key_id")
        scope = spec.get("scope") or value.get("scope")
        kind = "gcs" if tool == "gcs" or str(scope or "").startswith("gs://") else "s3"
        return {
            "TYPE": kind,
            "KEY_ID": value.get("key_id") or value.get("access_key_id"),
            "SECRET": value.get("secret") or value.get("secret_access_key"),
            "REGION": value.get("region"),
            "ENDPOINT": value.get("endpoint"),
            "SCOPE": scope,
        }
    raise SecretSpecError(
        f"`auth.{name}`: DuckDB secrets are made from postgres or hmac credentials, not {tool!r}"
    )


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
