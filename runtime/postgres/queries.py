"""Named SQL queries, loaded from the `.sql` files next to this module.

A file holds sections that start with `-- name: <query_name>`; the section's text up to the
next such line is the query (comments kept, they are harmless). Names are unique across files.
Migrations live in `sql/migrations/` and are not named queries.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_queries(text: str, source: str = "<sql>") -> dict[str, str]:
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


@cache
def queries() -> dict[str, str]:
    """Every named query of the package."""
    table: dict[str, str] = {}
    folder = resources.files("noetlc.runtime.postgres").joinpath("sql")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql") and entry.is_file():
            for name, body in parse_queries(entry.read_text(encoding="utf-8"), entry.name).items():
                if name in table:
                    raise ValueError(f"query {name!r} defined in two files")
                table[name] = body
    return table


def q(name: str) -> str:
    return queries()[name]
