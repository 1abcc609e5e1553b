"""PostgreSQL fixtures: a migrated session schema, fresh unmigrated schemas per test, and a
cluster of real server and worker processes on a schema of its module."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from noetlc.runtime.postgres.cluster_testing import Cluster
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


@pytest.fixture(scope="module")
def cluster_url() -> Iterator[str]:
    """A migrated schema per test module (its processes and jobs stay apart)."""
    yield from schema_or_skip()


@pytest.fixture
def cluster(cluster_url: str, tmp_path: Path) -> Iterator[Cluster]:
    """Servers and workers a test starts (`Cluster.server`, `.worker`), stopped after it."""
    c = Cluster(cluster_url, tmp_path)
    yield c
    c.stop()
