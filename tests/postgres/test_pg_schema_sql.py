"""runtime/postgres/sql/schema.sql is what the migrations make: both applied to empty schemas
give the same tables, columns, constraints, indexes, partitions and functions."""

from __future__ import annotations

from importlib import resources
from typing import Any

import pytest

from noetlc.runtime.postgres.connect import connect
from noetlc.runtime.postgres.migrate import upgrade

pytestmark = pytest.mark.postgres


async def describe(url: str, schema: str) -> dict[str, Any]:
    """The objects of one schema, its name written as `S`."""
    conn = await connect(url)
    try:
        found: dict[str, Any] = {}
        queries = {
            "columns": """
                SELECT table_name, ordinal_position, column_name, data_type, is_nullable,
                       column_default, is_identity, identity_generation
                FROM information_schema.columns WHERE table_schema = $1 ORDER BY 1, 2""",
            "relations": """
                SELECT c.relname, c.relkind, pg_get_partkeydef(c.oid),
                       pg_get_expr(c.relpartbound, c.oid)
                FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = $1 ORDER BY 1""",
            "constraints": """
                SELECT c.relname, k.conname, pg_get_constraintdef(k.oid)
                FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
                JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = $1 ORDER BY 1, 2""",
            "indexes": """
                SELECT tablename, indexname, indexdef FROM pg_indexes
                WHERE schemaname = $1 ORDER BY 1, 2""",
            "functions": """
                SELECT p.proname, pg_get_function_identity_arguments(p.oid),
                       pg_get_function_result(p.oid), p.provolatile, p.prosrc
                FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = $1 ORDER BY 1, 2""",
        }
        for what, sql in queries.items():
            rows = await conn.fetch(sql, schema)
            found[what] = [
                tuple(str(v).replace(schema, "S") if isinstance(v, str) else v for v in row)
                for row in rows
            ]
        return found
    finally:
        await conn.close()


async def test_schema_sql_is_what_the_migrations_make(pg_url: str, fresh_url: str) -> None:
    from noetlc.runtime.postgres.testing import drop_schema_sync, dsn_for_tests, with_schema

    await upgrade(fresh_url)
    migrated = fresh_url.rsplit("schema=", 1)[1]
    written = f"{migrated}_sql"
    url = with_schema(dsn_for_tests(), written)
    text = resources.files("noetlc.runtime.postgres").joinpath("sql", "schema.sql").read_text()
    conn = await connect(dsn_for_tests())
    try:
        await conn.execute(f'CREATE SCHEMA "{written}"')
    finally:
        await conn.close()
    try:
        conn = await connect(url)
        try:
            await conn.execute(text)
        finally:
            await conn.close()
        from_migrations = await describe(fresh_url, migrated)
        from_file = await describe(url, written)
    finally:
        drop_schema_sync(dsn_for_tests(), written)
    for what, rows in from_migrations.items():
        assert from_file[what] == rows, (
            f"runtime/postgres/sql/schema.sql differs from the migrations in its {what}:"
            " update it with the migration"
        )
