"""A cursor loop (`loop.cursor`) run by a cluster: the worker slots are iterations of a
parallel loop that different workers may run, claiming rows from one queue (the claim's
`FOR UPDATE SKIP LOCKED` keeps them apart), with the outcome of an embedded run."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from noetlc.runtime.postgres.cluster_testing import Cluster
from noetlc.runtime.postgres.testing import dsn_for_tests
from noetlc.stdlib_tools.registry import call_tool

pytestmark = pytest.mark.postgres

PLAYBOOK = Path(__file__).resolve().parents[1] / "fixtures" / "compat" / "cursor_loop.yaml"


def test_a_cursor_loop_drains_its_queue_across_workers(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = dsn_for_tests()
    monkeypatch.setenv("NOETL_KEYCHAIN_PG_LOCAL", json.dumps({"dsn": dsn}))
    schema = f"noetl_cursor_{uuid.uuid4().hex[:10]}"
    assert (
        call_tool("postgres", {"auth": dsn, "command": f"CREATE SCHEMA {schema}"})["status"] == "ok"
    )
    try:
        # leases that cannot expire under load: an expired slot runs again and claims new rows
        # while the rows it had claimed stay claimed (docs/compatibility.md, "Cursor loops");
        # this test is about SKIP LOCKED spreading the rows, not about expiry
        cluster.server(ttl=60.0)
        cluster.worker(2, ttl=60.0)
        cluster.worker(2, ttl=60.0)
        summary = cluster.submit(PLAYBOOK, f"schema={schema}", "rows=20", "slots=3")
    finally:
        call_tool("postgres", {"auth": dsn, "command": f"DROP SCHEMA {schema} CASCADE"})
    assert summary["status"] == "completed", summary
    [check] = summary["steps"]["check"]["result"]["rows"]
    expected = 2 * (sum(range(1, 21)) - 5)
    assert check == {"saved": 19, "total": expected, "most_claims": 1, "left": 0}
    slots = summary["steps"]["drain"]["result"]["results"]
    assert len(slots) == 3
    assert sum(s["processed"] for s in slots) == 19 and sum(s["failed"] for s in slots) == 1
