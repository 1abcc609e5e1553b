"""The distributed step's path, measured beside its floors in the same run, for A/B runs of two
checkouts (each with its own virtualenv), alternated on a shared machine.

    NOETLC_TEST_PG_DSN=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python -m bench.step_path latency [--chains 10]
    NOETLC_TEST_PG_DSN=... .venv/bin/python -m bench.step_path throughput [--rounds 2]

`latency`: one server `--no-inline` and two workers (`--concurrency 64`), a 50-step noop chain
submitted `--chains` times; prints the median over the chains of each chain's step-to-step
p50 (`step.done` to the next `step.done`), its smallest, and the floor of that path measured
right after: two commits (INSERT + WAL flush, p50), as bench/test_bench_distributed.py.
`throughput`: the same processes on a 20,000-iteration parallel noop loop, the best of
`--rounds` runs in tasks/s with the CPU per task of the server, the workers and the PostgreSQL
backends serving them, then the SKIP LOCKED floor (2 consumers, batch 64, best of `--rounds`).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import tempfile
import uuid
from pathlib import Path

import noetlc.bench.test_bench_distributed as b
from noetlc.ir.events import EventName
from noetlc.runtime.postgres.testing import temporary_schema

WORKERS = 2


def _cluster(url: str, prefix: str) -> tuple[list[subprocess.Popen[bytes]], dict[str, list[int]]]:
    server = b._spawn(
        "server", "--db", b._with_name(url, f"{prefix}_server"), "--poll", "0.2", "--no-inline"
    )
    args = ("--concurrency", "64", "--poll", "0.2")
    pool = [
        b._spawn("worker", "--db", b._with_name(url, f"{prefix}_worker"), *args)
        for _ in range(WORKERS)
    ]
    return [server, *pool], {"server": [server.pid], "worker": [p.pid for p in pool]}


def latency(chains: int) -> str:
    with tempfile.TemporaryDirectory() as tmp, temporary_schema("bench_step_path") as url:
        chain = b._chain_playbook(Path(tmp))
        procs, _ = _cluster(url, f"path_{uuid.uuid4().hex[:6]}")
        try:
            b._submit(url, chain)  # programs parsed, connections open
            p50s = []
            order = ["start", *[f"s{i}" for i in range(1, b.CHAIN)]]
            for _ in range(chains):
                events = b._events(url, b._submit(url, chain))
                done = {e["step"]: e["ts"] for e in events if e["name"] == EventName.STEP_DONE}
                steps = [(done[y] - done[x]) * 1000 for x, y in itertools.pairwise(order)]
                p50s.append(statistics.median(steps))
            floor = 2 * b._commit_ms(url)
        finally:
            b._stop(procs)
    return (
        f"step-to-step p50, median of {chains} chains of {b.CHAIN}: "
        f"{statistics.median(p50s):.2f} ms (smallest {min(p50s):.2f}); "
        f"floor, two commits: {floor:.2f} ms"
    )


def throughput(rounds: int) -> str:
    with tempfile.TemporaryDirectory() as tmp, temporary_schema("bench_step_path") as url:
        folder = Path(tmp)
        loop, warm = b._loop_playbook(folder), b._loop_playbook(folder, 200)
        prefix = f"path_{uuid.uuid4().hex[:6]}"
        procs, pids = _cluster(url, prefix)
        rates: list[float] = []
        best: tuple[float, dict[str, float]] = (0.0, {})
        try:
            b._submit(url, warm)
            backends = b._backends(url, prefix)
            for _ in range(rounds):
                before = b._cpu_sample(pids, backends)
                rate = b._loop_rate(url, loop)
                after = b._cpu_sample(pids, backends)
                rates.append(rate)
                if rate > best[0]:
                    cpu = {k: (after[k] - before[k]) / b.ITERATIONS * 1e6 for k in after}
                    best = (rate, cpu)
        finally:
            b._stop(procs)
        floor = max(b._floor(url, WORKERS, 64, 20_000) for _ in range(rounds))
    shares = ", ".join(f"{k} {v:.1f} µs" for k, v in best[1].items())
    return (
        f"{WORKERS} workers: {best[0]:,.0f} tasks/s (runs: {', '.join(f'{r:,.0f}' for r in rates)});"
        f" SKIP LOCKED floor {floor:,.0f} jobs/s (ratio {best[0] / floor:.2f});"
        f" CPU per task: {shares}; in all {sum(best[1].values()):.1f} µs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["latency", "throughput"])
    parser.add_argument("--chains", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(latency(args.chains) if args.what == "latency" else throughput(args.rounds))


if __name__ == "__main__":
    main()
