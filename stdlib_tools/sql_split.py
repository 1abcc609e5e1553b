"""Split SQL text into statements at top-level semicolons.

The SQL tools run a script's statements one by one in one transaction, so the last statement's
rows can be the result (PostgreSQL's extended protocol and sqlite3 take one statement at a
time). Semicolons inside quoted strings (`'...'` with `''`, `E'...'` with backslash escapes),
quoted identifiers (`"..."`), dollar-quoted bodies (`$tag$...$tag$`, as in function
definitions) and comments (`-- ...`, nested `/* ... */`) do not split.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from noetlc.stdlib_tools.envelope import jsonable

_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def split_statements(sql: str) -> list[str]:
    """The non-empty statements of `sql`, stripped, without their trailing semicolons."""
    out: list[str] = []
    start = 0
    i = 0
    n = len(sql)
    while i < n:
        c = sql[i]
        if c == "'":
            escapes = i > 0 and sql[i - 1] in "eE" and (i < 2 or not _word(sql[i - 2]))
            i = _skip_quoted(sql, i, "'", backslash=escapes)
        elif c == '"':
            i = _skip_quoted(sql, i, '"', backslash=False)
        elif c == "-" and sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif c == "/" and sql.startswith("/*", i):
            i = _skip_block_comment(sql, i)
        elif c == "$" and (i == 0 or not _word(sql[i - 1])):
            m = _DOLLAR_TAG.match(sql, i)
            if m is None:
                i += 1
            else:
                end = sql.find(m.group(0), m.end())
                i = n if end < 0 else end + len(m.group(0))
        elif c == ";":
            _add(out, sql[start:i])
            i += 1
            start = i
        else:
            i += 1
    _add(out, sql[start:])
    return out


def _word(c: str) -> bool:
    return c.isalnum() or c == "_"


def _add(out: list[str], text: str) -> None:
    stripped = text.strip()
    if stripped and not _only_comments(stripped):
        out.append(stripped)


def _only_comments(text: str) -> bool:
    rest = re.sub(r"--[^\n]*", "", text)
    rest = re.sub(r"/\*.*?\*/", "", rest, flags=re.S)
    return not rest.strip()


def _skip_quoted(sql: str, i: int, quote: str, *, backslash: bool) -> int:
    i += 1
    n = len(sql)
    while i < n:
        c = sql[i]
        if backslash and c == "\\":
            i += 2
            continue
        if c == quote:
            if i + 1 < n and sql[i + 1] == quote:  # doubled quote: an escaped quote
                i += 2
                continue
            return i + 1
        i += 1
    return n


def _skip_block_comment(sql: str, i: int) -> int:
    depth = 0
    n = len(sql)
    while i < n:
        if sql.startswith("/*", i):
            depth += 1
            i += 2
        elif sql.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


def run_script(
    conn: Any,
    statements: list[str],
    query: str,
    params: Any,
    execute: Callable[[Any, str, Any], dict[str, Any]],
    begin: str = "BEGIN",
) -> dict[str, Any]:
    """One statement runs with its parameters; several run in one transaction (all or none).
    The result is the last statement's, with the number of statements and every statement's
    own result as `command_0`, `command_1`, ... (NoETL's shape)."""
    if len(statements) <= 1:
        return with_commands([execute(conn, query, params)])
    conn.execute(begin)
    results = []
    try:
        for text in statements:
            results.append(execute(conn, text, None))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return with_commands(results)


def with_commands(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The last statement's result, `statements`, and `command_<i>` for each statement (its
    `rows`, `columns`, `row_count`/`rowcount` and, for PostgreSQL, `status`)."""
    out = dict(results[-1])
    out["statements"] = len(results)
    for i, one in enumerate(results):
        out[f"command_{i}"] = {k: v for k, v in one.items() if k != "statements"}
    return out


def rows_result(columns: list[str], rows: list[Any], count: int) -> dict[str, Any]:
    """The result of one SQL statement, as the sqlite and duckdb tools return it."""
    return {
        "rows": [jsonable(dict(zip(columns, row, strict=False))) for row in rows],
        "columns": columns,
        "rowcount": count,
        "row_count": count,
        "statements": 1,
    }
