"""PostgreSQL fixtures: a migrated session schema, and fresh unmigrated schemas per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from noetlc.runtime.postgres.testing import (
    drop_schema_sync,
    dsn_for_tests,
    schema_or_skip,
    with_schema,
)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    yield from schema_or_skip()


@pytest.fixture
def fresh_url(pg_url: str) -> Iterator[str]:
    """A URL naming a schema that does not exist yet (dropped after the test)."""
    schema = f"noetl_fresh_{uuid.uuid4().hex[:12]}"
    yield with_schema(dsn_for_tests(), schema)
    drop_schema_sync(dsn_for_tests(), schema)
