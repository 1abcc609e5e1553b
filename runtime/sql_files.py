"""Named SQL statements in `.sql` files: a file holds sections that start with
`-- name: <query_name>`; a section's text up to the next such line is one statement (comments
kept, they are harmless). Both stores read their SQL this way: the SQLite service tables
(`runtime/sql/`) and the PostgreSQL queries (`runtime/postgres/sql/`)."""

from __future__ import annotations

import re

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_queries(text: str, source: str = "<sql>") -> dict[str, str]:
    """`-- name: NAME` sections of a .sql file -> {NAME: statement}; a name given twice is an
    error (the second would silently win)."""
    out: dict[str, str] = {}
    marks = list(_NAME.finditer(text))
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = text[mark.end() : end].strip()
        name = mark.group(1)
        if name in out:
            raise ValueError(f"query {name!r} defined twice in {source}")
        out[name] = body
    return out
