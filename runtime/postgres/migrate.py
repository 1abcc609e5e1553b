"""Versioned schema migrations: `sql/migrations/NNNN_name.sql`, applied in order.

`upgrade` takes a session advisory lock (keyed by the schema), so concurrent upgraders queue
up and the second finds nothing left to do; each migration runs in one transaction together
with its row in `schema_migrations` (version, name, sha256 of the file). `status` compares the
database with the files; `require_current` is what servers and workers call before they start.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import asyncpg

from noetlc.runtime.postgres.connect import PgUrl, connect, connection_error, parse_url
from noetlc.runtime.postgres.errors import DatabaseError
from noetlc.runtime.postgres.queries import q

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str
    checksum: str


@dataclass(frozen=True, slots=True)
class AppliedMigration:
    version: int
    name: str
    checksum: str
    applied_at: str


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    schema: str
    applied: tuple[AppliedMigration, ...]
    pending: tuple[Migration, ...]
    unknown: tuple[AppliedMigration, ...]  # in the database, not in this release
    modified: tuple[AppliedMigration, ...]  # checksum differs from the shipped file

    @property
    def current(self) -> bool:
        return not (self.pending or self.unknown or self.modified)


@cache
def migrations() -> tuple[Migration, ...]:
    folder = resources.files("noetlc.runtime.postgres").joinpath("sql", "migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        m = _FILE.match(entry.name)
        if m:
            text = entry.read_text(encoding="utf-8")
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            found.append(Migration(int(m.group(1)), m.group(2), text, digest))
    found.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"two migrations share a version: {versions}")
    return tuple(found)


async def _applied(conn: asyncpg.Connection) -> tuple[AppliedMigration, ...]:
    if not await conn.fetchval(q("migrations_table_exists")):
        return ()
    rows = await conn.fetch(q("applied_migrations"))
    return tuple(
        AppliedMigration(r["version"], r["name"], r["checksum"], r["applied_at"]) for r in rows
    )


def _compare(schema: str, applied: tuple[AppliedMigration, ...]) -> SchemaStatus:
    shipped = {m.version: m for m in migrations()}
    done = {a.version for a in applied}
    return SchemaStatus(
        schema=schema,
        applied=applied,
        pending=tuple(m for m in migrations() if m.version not in done),
        unknown=tuple(a for a in applied if a.version not in shipped),
        modified=tuple(
            a for a in applied if a.version in shipped and shipped[a.version].checksum != a.checksum
        ),
    )


def _check_compatible(status: SchemaStatus) -> None:
    if status.unknown:
        newest = max(a.version for a in status.unknown)
        raise DatabaseError(
            "NOE809",
            f"schema {status.schema!r} has migration {newest:04d}, newer than this noetl knows "
            f"(latest {migrations()[-1].version:04d})",
            "upgrade noetl on this machine to the release that migrated the database",
        )
    if status.modified:
        bad = status.modified[0]
        raise DatabaseError(
            "NOE811",
            f"migration {bad.version:04d}_{bad.name} in schema {status.schema!r} differs from "
            "the file this noetl ships",
            "use the noetl release that created the database, or migrate into a fresh schema",
        )


async def schema_status(url: str | PgUrl) -> SchemaStatus:
    parsed = parse_url(url) if isinstance(url, str) else url
    conn = await connect(parsed)
    try:
        return _compare(parsed.schema, await _applied(conn))
    except asyncpg.PostgresError as exc:
        raise connection_error(parsed, exc) from None
    finally:
        await conn.close()


async def require_current(conn: asyncpg.Connection, schema: str) -> None:
    """Raise NOE808/809/811 unless the schema is exactly what this release expects."""
    status = _compare(schema, await _applied(conn))
    _check_compatible(status)
    if status.pending:
        first = status.pending[0]
        raise DatabaseError(
            "NOE808",
            f"schema {schema!r} is missing migration {first.version:04d}_{first.name}"
            + (" (the database was never initialised for noetl)" if not status.applied else ""),
            "run `noetl-vm db upgrade --db URL`",
        )


async def upgrade(url: str | PgUrl) -> list[Migration]:
    """Apply the pending migrations; returns those this call applied (none when current)."""
    parsed = parse_url(url) if isinstance(url, str) else url
    conn = await connect(parsed)
    try:
        await conn.execute("SELECT pg_advisory_lock(hashtext($1))", _lock_key(parsed))
        try:
            return await _upgrade_locked(conn, parsed)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(hashtext($1))", _lock_key(parsed))
    except asyncpg.PostgresError as exc:
        raise connection_error(parsed, exc) from None
    finally:
        await conn.close()


def _lock_key(url: PgUrl) -> str:
    return f"noetl.schema_migrations.{url.schema}"


async def _upgrade_locked(conn: asyncpg.Connection, url: PgUrl) -> list[Migration]:
    # The schema name is a checked plain identifier (parse_url), safe to interpolate.
    await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{url.schema}"')
    await conn.execute(q("create_migrations_table"))
    status = _compare(url.schema, await _applied(conn))
    _check_compatible(status)
    done: list[Migration] = []
    for migration in status.pending:
        try:
            async with conn.transaction():
                await conn.execute(migration.sql)
                await conn.execute(
                    q("record_migration"), migration.version, migration.name, migration.checksum
                )
        except asyncpg.PostgresError as exc:
            raise DatabaseError(
                "NOE810",
                f"migration {migration.version:04d}_{migration.name} failed and was rolled "
                f"back: {exc}",
                "read PostgreSQL's message; grant CREATE on the schema or use another schema",
            ) from None
        done.append(migration)
    return done
