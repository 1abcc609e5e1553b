"""Schema migrations: from scratch, idempotent, concurrent, and every way they can refuse."""

from __future__ import annotations

import asyncio

import pytest

from noetlc.runtime.postgres.connect import connect
from noetlc.runtime.postgres.database import Database
from noetlc.runtime.postgres.errors import DatabaseError
from noetlc.runtime.postgres.migrate import migrations, schema_status, upgrade

pytestmark = pytest.mark.postgres

TABLES = {"schema_migrations", "executions", "events", "jobs", "execution_owners", "results"}


async def _tables(url: str) -> set[str]:
    conn = await connect(url)
    try:
        rows = await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        )
    finally:
        await conn.close()
    return {r["tablename"] for r in rows}


def test_migration_files_are_numbered_and_checksummed():
    found = migrations()
    assert [m.version for m in found] == list(range(1, len(found) + 1))
    assert found[0].name == "init" and len(found[0].checksum) == 64


async def test_upgrade_from_scratch_then_nothing_to_do(fresh_url):
    before = await schema_status(fresh_url)
    assert not before.current and not before.applied and len(before.pending) == len(migrations())
    applied = await upgrade(fresh_url)
    assert [m.version for m in applied] == [m.version for m in migrations()]
    assert await _tables(fresh_url) >= TABLES
    assert sum(t.startswith("events_p") for t in await _tables(fresh_url)) == 16
    assert await upgrade(fresh_url) == []
    after = await schema_status(fresh_url)
    assert after.current and [a.version for a in after.applied] == [m.version for m in migrations()]


async def test_concurrent_upgrades_apply_each_migration_once(fresh_url):
    results = await asyncio.gather(*(upgrade(fresh_url) for _ in range(4)))
    assert sorted(len(r) for r in results) == [0, 0, 0, len(migrations())]
    assert (await schema_status(fresh_url)).current


async def test_an_unmigrated_schema_is_refused_with_noe808(fresh_url):
    with pytest.raises(DatabaseError) as info:
        await Database.open(fresh_url)
    assert info.value.code == "NOE808" and "db upgrade" in (info.value.hint or "")


async def _tamper(url: str, sql: str) -> None:
    conn = await connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def test_a_newer_schema_is_refused_with_noe809(fresh_url):
    await upgrade(fresh_url)
    await _tamper(
        fresh_url,
        "INSERT INTO schema_migrations (version, name, checksum) VALUES (9999, 'future', 'x')",
    )
    for attempt in (upgrade(fresh_url), Database.open(fresh_url)):
        with pytest.raises(DatabaseError) as info:
            await attempt
        assert info.value.code == "NOE809"
    assert [a.version for a in (await schema_status(fresh_url)).unknown] == [9999]


async def test_an_edited_migration_is_refused_with_noe811(fresh_url):
    await upgrade(fresh_url)
    await _tamper(fresh_url, "UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1")
    with pytest.raises(DatabaseError) as info:
        await Database.open(fresh_url)
    assert info.value.code == "NOE811"


async def test_a_failing_migration_is_rolled_back_with_noe810(fresh_url):
    # An unrelated table of the same name is in the way: 0001 fails and leaves nothing behind.
    conn = await connect(fresh_url.replace("?schema=", "?x=").split("?")[0])
    schema = fresh_url.rsplit("schema=", 1)[1]
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"; CREATE TABLE "{schema}".jobs (x int)')
    finally:
        await conn.close()
    with pytest.raises(DatabaseError) as info:
        await upgrade(fresh_url)
    assert info.value.code == "NOE810" and "0001_init" in str(info.value)
    assert await _tables(fresh_url) == {"schema_migrations", "jobs"}
    assert not (await schema_status(fresh_url)).applied
