"""Named SQL statements in `.sql` files: a file holds sections that start with
`-- name: <query_name>`; a section's text up to the next such line is one statement (comments
kept, they are harmless). Both stores read their SQL this way, procrastinate-style: the
SQLite store (`runtime/sql/`, through `q` here) and the PostgreSQL queries
(`runtime/postgres/sql/`, through runtime/postgres/queries.py). Each folder also holds
`schema.sql`, the schema its migrations produce (no named sections; tests/runtime/
test_schema_sql.py keeps it current)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

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


def load_queries(folder: Traversable | Path) -> dict[str, str]:
    """Every named statement of the `.sql` files in `folder` (not its subfolders, not
    `schema.sql`); a name is unique across the files."""
    table: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql") and entry.name != "schema.sql" and entry.is_file():
            for name, body in parse_queries(entry.read_text(encoding="utf-8"), entry.name).items():
                if name in table:
                    raise ValueError(f"query {name!r} defined in two files")
                table[name] = body
    return table


@cache
def sqlite_queries() -> dict[str, str]:
    """Every named statement of the SQLite store. The folder is read beside this module:
    `importlib.resources` (zipfile, tempfile and more) would cost each cold `noetl-vm run`
    more than the whole SQLite module; a package that is not on disk still reads it there."""
    folder = Path(__file__).parent / "sql"
    if folder.is_dir():
        return load_queries(folder)
    from importlib import resources

    return load_queries(resources.files("noetlc.runtime").joinpath("sql"))


def q(name: str) -> str:
    """A named statement of the SQLite store (`runtime/sql/*.sql`)."""
    return sqlite_queries()[name]
