"""Test support: a throw-away, migrated schema on the PostgreSQL named by the environment.

`NOETLC_TEST_PG_DSN` names the server (default: the local one with trust auth). When it is
unreachable, tests are skipped with the reason — unless `CI=true`, where they must fail,
because CI starts PostgreSQL and a silent skip would hide a broken setup.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from noetlc.runtime.postgres.connect import connect, parse_url
from noetlc.runtime.postgres.errors import DatabaseError
from noetlc.runtime.postgres.migrate import upgrade

T = TypeVar("T")

DEFAULT_TEST_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
# Tables emptied between tests sharing one schema (children before parents).
TABLES = ("events", "executions", "jobs", "execution_owners", "results", "job_waiters")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion on its own loop in a helper thread: works whether or not
    the caller is inside a running event loop (session fixtures requested by async tests)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def dsn_for_tests() -> str:
    return os.environ.get("NOETLC_TEST_PG_DSN", DEFAULT_TEST_DSN)


def must_not_skip() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def with_schema(dsn: str, schema: str) -> str:
    joiner = "&" if "?" in dsn else "?"
    return f"{dsn}{joiner}schema={schema}"


async def unreachable_reason(dsn: str) -> str | None:
    """None when PostgreSQL answers, else why not."""
    try:
        conn = await connect(dsn)
    except DatabaseError as exc:
        return exc.render()
    await conn.close()
    return None


async def _drop_schema(dsn: str, schema: str) -> None:
    conn = await connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def drop_schema_sync(dsn: str, schema: str) -> None:
    run_sync(_drop_schema(dsn, schema))


@contextmanager
def temporary_schema(prefix: str = "noetl_test") -> Iterator[str]:
    """Create a uniquely named schema, migrate it, yield its URL, drop it afterwards.
    Raises DatabaseError when the server is unreachable (the caller skips or fails)."""
    dsn = dsn_for_tests()
    parse_url(dsn)
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    url = with_schema(dsn, schema)
    run_sync(upgrade(url))
    try:
        yield url
    finally:
        run_sync(_drop_schema(dsn, schema))


def dsn_or_skip() -> str:
    """The test server's DSN when it answers; else skip the test (fail it under CI)."""
    import pytest

    reason = run_sync(unreachable_reason(dsn_for_tests()))
    if reason is not None:
        message = f"PostgreSQL not reachable (NOETLC_TEST_PG_DSN={dsn_for_tests()}): {reason}"
        if must_not_skip():
            pytest.fail(f"{message} — CI=true, so this is a failure, not a skip")
        pytest.skip(message)
    return dsn_for_tests()


def schema_or_skip() -> Iterator[str]:
    """The body of a session fixture: a migrated schema's URL, or skip (fail under CI)."""
    dsn_or_skip()
    with temporary_schema() as url:
        yield url


async def truncate_all(url: str) -> None:
    conn = await connect(url)
    try:
        await conn.execute(f"TRUNCATE {', '.join(TABLES)}")
    finally:
        await conn.close()
