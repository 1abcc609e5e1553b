"""Named SQL queries, loaded from the `.sql` files next to this module.

Sections start with `-- name: <query_name>` (runtime/sql_files.py); names are unique across
files. Parameters are positional (`$1`), as asyncpg binds them.
Migrations live in `sql/migrations/` and are not named queries; `sql/schema.sql` is the schema
they produce.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from noetlc.runtime.sql_files import load_queries


@cache
def queries() -> dict[str, str]:
    """Every named query of the package."""
    return load_queries(resources.files("noetlc.runtime.postgres").joinpath("sql"))


def q(name: str) -> str:
    return queries()[name]
