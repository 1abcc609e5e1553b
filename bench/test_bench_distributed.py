"""Distributed mode end to end: noop tasks/s with 1, 2 and 4 workers, and step latency.

Run: `.venv/bin/python -m pytest bench/test_bench_distributed.py -m bench -q -s`
(PostgreSQL from NOETLC_TEST_PG_DSN; a throw-away schema).

* tasks/s: one server and N worker processes (`--concurrency 64`) run a parallel loop of
  2,000 noop iterations (`max_in_flight: 500`); the rate is iterations / (loop.done −
  loop.started) from the event timestamps. Target: ≥ 10,000/s with batched leasing.
* step latency: a 50-step noop chain; for each step, the time from the worker's `step.done`
  of one step to the worker's `step.started` of the next (p50, p99).
* floor, measured in the same run: raw SKIP LOCKED lease + complete of noop jobs with the same
  number of consumers and batch size, no events (bench/test_bench_pg_queue.py's drain).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from noetlc.bench.figures import record, target
from noetlc.runtime.postgres.database import Database
from noetlc.runtime.postgres.store import PostgresStore
from noetlc.runtime.postgres.testing import schema_or_skip, truncate_all
from noetlc.runtime.queue import JobSpec

pytestmark = pytest.mark.bench

ITERATIONS = 2_000
CHAIN = 50


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    yield from schema_or_skip()


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "noetlc.cli.vm_main", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        proc.wait(timeout=30)


def _submit(url: str, playbook: Path) -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "noetlc.cli.vm_main",
            "submit",
            str(playbook),
            "--db",
            url,
            "--wait",
            "--json",
            "--timeout",
            "300",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["status"] == "completed", summary
    return str(summary["execution_id"])


def _events(url: str, execution_id: str) -> list[dict[str, Any]]:
    store = PostgresStore(url)
    try:
        return store.read(execution_id)
    finally:
        store.close()


def _loop_playbook(folder: Path) -> Path:
    path = folder / "wide.yaml"
    path.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: wide, path: bench/wide}\n"
        f"workload: {{items: {list(range(ITERATIONS))}}}\n"
        "workflow:\n  - step: start\n"
        '    loop: {in: "{{ workload.items }}", iterator: x,'
        " spec: {mode: parallel, max_in_flight: 500}}\n"
        "    tool: {kind: noop}\n"
    )
    return path


def _chain_playbook(folder: Path) -> Path:
    lines = [
        "apiVersion: noetl.io/v2",
        "kind: Playbook",
        "metadata: {name: chain, path: bench/chain}",
        "workflow:",
    ]
    for i in range(CHAIN):
        lines.append(f"  - step: {'start' if i == 0 else f's{i}'}")
        lines.append("    tool: {kind: noop}")
        if i + 1 < CHAIN:
            lines.append(f"    next: {{arcs: [{{step: s{i + 1}}}]}}")
    path = folder / "chain.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _floor(url: str, consumers: int, batch: int, n: int) -> float:
    async def run() -> float:
        await truncate_all(url)
        db = await Database.open(url, max_size=consumers + 2)
        try:
            specs = [JobSpec(f"f{i}", "floor", f"f{i}", {"i": i}) for i in range(n)]
            for start in range(0, n, 1000):
                await db.queue.enqueue(specs[start : start + 1000])
            started = time.perf_counter()

            async def consumer(name: str) -> None:
                leases = await db.queue.lease(name, limit=batch)
                while leases:
                    _, leases = await db.queue.complete_and_lease(leases, name, limit=batch)

            await asyncio.gather(*(consumer(f"c{i}") for i in range(consumers)))
            return n / (time.perf_counter() - started)
        finally:
            await db.close()

    return asyncio.run(run())


def _measure(url: str) -> dict[str, Any]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        loop, chain = _loop_playbook(folder), _chain_playbook(folder)
        latencies: list[float] = []
        for workers in (1, 2, 4):
            asyncio.run(truncate_all(url))
            procs = [_spawn("server", "--db", url, "--poll", "0.2")]
            procs += [
                _spawn("worker", "--db", url, "--concurrency", "64", "--poll", "0.2")
                for _ in range(workers)
            ]
            try:
                events = _events(url, _submit(url, loop))
                started = next(e["ts"] for e in events if e["name"] == "loop.started")
                done = next(e["ts"] for e in events if e["name"] == "loop.done")
                rate = ITERATIONS / (done - started)
                if workers == 1:
                    chain_events = _events(url, _submit(url, chain))
                    ends = {
                        e["step"]: e["ts"]
                        for e in chain_events
                        if e["name"] == "step.done" and e["source"] == "worker"
                    }
                    starts = {
                        e["step"]: e["ts"]
                        for e in chain_events
                        if e["name"] == "step.started" and e["source"] == "worker"
                    }
                    order = ["start", *[f"s{i}" for i in range(1, CHAIN)]]
                    latencies = [(starts[b] - ends[a]) * 1000 for a, b in itertools.pairwise(order)]
            finally:
                _stop(procs)
            floor = _floor(url, workers, 64, 20_000)
            rows.append((workers, rate, floor))
    return {"rows": rows, "latencies": latencies}


def test_distributed_throughput_and_latency(
    url: str, benchmark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    measured: dict[str, Any] = {}
    benchmark.pedantic(lambda: measured.update(_measure(url)), rounds=1, iterations=1)
    rows, latencies = measured["rows"], sorted(measured["latencies"])
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    for workers, rate, floor in rows:
        record(
            benchmark,
            figure=f"distributed noop tasks/s, {workers} worker(s), 1 server",
            value=rate,
            unit="tasks/s",
            better="higher",
            against=f"floor: SKIP LOCKED lease+complete, {workers} consumer(s), batch 64",
            against_value=floor,
            target=target("value", ">=", 10_000, "target: ≥ 10,000 tasks/s"),
            group="distributed",
        )
    for name, value in (("p50", p50), ("p99", p99)):
        record(
            benchmark,
            figure=f"distributed step-to-step latency {name} ({CHAIN}-step chain, 1 worker)",
            value=value,
            unit="ms",
            better="lower",
            against=None,
            against_value=None,
            group="distributed",
        )
    with capsys.disabled():
        print("\n| workers | noop tasks/s end to end | floor: lease+complete jobs/s | of floor |")
        print("|---:|---:|---:|---:|")
        for workers, rate, floor in rows:
            print(f"| {workers} | {rate:,.0f} | {floor:,.0f} | {rate / floor:.0%} |")
        print(f"\nstep-to-step latency, {CHAIN}-step chain: p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    assert all(rate > 0 for _, rate, _ in rows)
