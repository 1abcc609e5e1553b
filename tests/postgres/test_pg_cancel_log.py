"""Distributed cancel with real processes: one terminal event carrying the requester's
reason, the iterations still running when it came are refused, nothing at all is logged after
it (the owning server answers the client's request once its own events are in: no server
event decided from earlier inputs lands after the terminal event either), and the stored
summary keeps no step `running`. The log checker's invariants hold with no exception."""

from __future__ import annotations

import time
from pathlib import Path

from noetlc.runtime.logcheck import check_log
from noetlc.runtime.postgres.cluster_testing import Cluster
from noetlc.runtime.postgres.cluster_testing import run_vm as _vm
from noetlc.runtime.postgres.event_store import PostgresStore
from tests.hostile.test_cancel_log import NAPS


def test_a_distributed_cancel_is_one_terminal_event_with_its_reason(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.server()
    cluster.worker(concurrency=4)
    (tmp_path / "naps.yaml").write_text(NAPS)
    started = cluster.submit(tmp_path / "naps.yaml", "n=60", wait=False)
    execution = started["execution_id"]
    store = PostgresStore(cluster.url)
    try:
        deadline = time.monotonic() + 60
        while sum(e["name"] == "loop.iteration.done" for e in store.read(execution)) < 6:
            assert time.monotonic() < deadline, "the loop never ran"
            time.sleep(0.1)
        proc = _vm("cancel", execution, "--reason", "maintenance window", "--db", cluster.url)
        assert proc.wait(timeout=60) == 0
        while store.execution(execution)["status"] == "running":  # type: ignore[index]
            assert time.monotonic() < deadline, "the cancel never ended it"
            time.sleep(0.1)
        time.sleep(1.0)  # the iterations that were running have ended by now
        record = store.execution(execution)
        events = store.read(execution)
        assert record is not None and record["status"] == "cancelled"
        cancels = [e for e in events if e["name"] == "execution.cancelled"]
        assert [c["payload"].get("reason") for c in cancels] == ["maintenance window"]
        assert cancels[0]["seq"] == events[-1]["seq"], events[cancels[0]["seq"] :]
        requests = [e for e in events if e["name"] == "execution.cancel.requested"]
        assert len(requests) == 1 and requests[0]["seq"] < cancels[0]["seq"]
        steps = record["summary"]["steps"]
        assert steps["each"]["status"] == "cancelled"
        assert check_log(execution, events, record["status"]) == []
    finally:
        store.close()
