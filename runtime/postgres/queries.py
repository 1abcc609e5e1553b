"""Named SQL queries, loaded from the `.sql` files next to this module.

Sections start with `-- name: <query_name>` (runtime/sql_files.py); names are unique across
files.
Migrations live in `sql/migrations/` and are not named queries.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from noetlc.runtime.sql_files import parse_queries


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
