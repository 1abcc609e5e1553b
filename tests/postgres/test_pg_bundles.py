"""Several loop iterations per job (runtime/bundles.py) with real processes on PostgreSQL:
bundled iterations of a real tool run once each, across workers, a SIGKILLed server and its
successor's takeover (which must not enqueue the iterations its stored bundles hold again)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

from noetlc.runtime.postgres.cluster_testing import Cluster
from noetlc.runtime.postgres.cluster_testing import run_vm as _vm
from noetlc.runtime.postgres.connect import connect
from noetlc.runtime.postgres.event_store import PostgresStore

N = 400


def _playbook(folder: Path) -> tuple[Path, Path]:
    log = folder / "calls.log"
    path = folder / "bundled.yaml"
    # 256 iterations in flight: a round that starts them makes bundles of 4 (256 // 64)
    path.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: bundled, path: t/bundled}\n"
        f"workload: {{items: {list(range(N))}, log: {str(log)!r}}}\n"
        "workflow:\n  - step: start\n"
        '    loop: {in: "{{ workload.items }}", iterator: n, spec: {mode: parallel,'
        " max_in_flight: 256}}\n"
        "    tool:\n      kind: python\n"
        '      input: {n: "{{ iter.n }}", log: "{{ workload.log }}"}\n'
        "      code: |\n"
        "        import time\n"
        "        with open(log, 'a') as fh:\n"
        "            fh.write(f'{n}\\n')\n"
        "        time.sleep(0.1)\n"
        "        result = n\n"
    )
    return path, log


def _wait_for(predicate: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _bundles(url: str, execution_id: str, statuses: tuple[str, ...]) -> int:
    """How many of the execution's jobs in these statuses are bundles."""

    async def count() -> int:
        conn = await connect(url)
        try:
            return int(
                await conn.fetchval(
                    "SELECT count(*) FROM jobs WHERE execution_id = $1"
                    " AND status = ANY ($2::text[]) AND payload::jsonb ? 'members'",
                    execution_id,
                    list(statuses),
                )
            )
        finally:
            await conn.close()

    return asyncio.run(count())


def test_a_server_killed_with_bundles_in_flight_is_taken_over_without_reruns(
    cluster: Cluster, tmp_path: Path
) -> None:
    playbook, log = _playbook(tmp_path)
    victim = cluster.server(1.0, 0.2)
    cluster.worker(4)
    cluster.worker(4)
    execution_id = cluster.submit(playbook, wait=False)["execution_id"]

    def calls() -> int:
        return len(log.read_text().splitlines()) if log.exists() else 0

    _wait_for(lambda: calls() >= 16)  # bundles enqueued and running
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    # the heir takes over when the dead server's lease expires (1 s); it bundles 3 per job,
    # so regrouping the outstanding iterations never lands on the dead server's job ids
    cluster.server(2.0, 0.2, "--iterations-per-job", "3")
    # the heir finds bundles the dead server enqueued still queued or running
    assert _bundles(cluster.url, execution_id, ("queued", "leased")) > 0
    store = PostgresStore(cluster.url)
    try:
        _wait_for(lambda: store.execution(execution_id)["status"] != "running")  # type: ignore[index]
        record = store.execution(execution_id)
        events = store.read(execution_id)
    finally:
        store.close()
    assert record is not None and record["status"] == "completed", record
    assert record["summary"]["steps"]["start"]["result"]["results"] == list(range(N))
    # every item ran exactly once: no bundled iteration was enqueued a second time
    assert Counter(log.read_text().split()) == Counter(str(n) for n in range(N))
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    for name in ("loop.iteration.started", "loop.iteration.done"):
        per_iteration = Counter(e["iteration"] for e in events if e["name"] == name)
        assert sorted(per_iteration) == list(range(N)) and set(per_iteration.values()) == {1}
    replay = _vm("replay", execution_id, "--db", cluster.url, "--json")
    out, err = replay.communicate(timeout=60)
    assert replay.returncode == 0 and json.loads(out)["ok"], out + err
