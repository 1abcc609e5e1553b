"""What separating task code from the service costs per python task.

    .venv/bin/python -m bench.task_isolation [--steps 100] [--runs 7]

Runs the benchmarks' python chain (`generators.chain`: each step a python task `result = x`
with a templated input and a guarded arc) on the embedded runtime with a SQLite log, three
ways, and prints the best wall time per task of each:

* before: the code runs in this process and is compiled at every call (the service before
  the separation);
* inline: the same with compiled code cached (`noetl-vm run` now);
* pool: the code runs in a warm runner process (`isolation.configure("process")`, what
  `noetl-vm serve` and `worker` do now): one pipe round trip per task, code cached there;
* no pool: a new runner process per task (what the pool saves), fewer steps.

Also the floor of one inline python task call alone (no VM, no store), for scale.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from noetlc.bench import generators
from noetlc.stdlib_tools import isolation


def _program(steps: int) -> object:
    from noetlc.compiler.pipeline import compile_source

    unit = compile_source(generators.chain(steps), file="chain.yaml")
    assert unit.payload is not None, [d.message for d in unit.reporter.sorted()]
    return unit.payload


def _run(payload: object, folder: Path, index: int) -> float:
    from noetlc.runtime.embedded import run_embedded
    from noetlc.runtime.event_store import SQLiteStore

    store = SQLiteStore(str(folder / f"run{index}.db"))
    try:
        started = time.perf_counter()
        summary = run_embedded(payload, {}, store)  # type: ignore[arg-type]
        elapsed = time.perf_counter() - started
    finally:
        store.close()
    assert summary["status"] == "completed", summary.get("error")
    return elapsed


def measure(steps: int, runs: int, folder: Path) -> dict[str, float]:
    """Best seconds per task of each way, the runs interleaved (inline, pool, inline...) so
    that a load change on the machine hits every way alike."""
    from noetlc.stdlib_tools import python_exec

    payload = _program(steps)
    cached = python_exec._compiled
    uncached = cached.__wrapped__  # the code compiled at every call, as before this change
    best: dict[str, float] = {}
    count = 0

    def once(way: str) -> None:
        nonlocal count
        count += 1
        setattr(python_exec, "_compiled", uncached if way == "before" else cached)  # noqa: B010
        isolation.configure("inline" if way in ("before", "inline") else "process")
        seconds = _run(payload, folder, count) / steps
        best[way] = min(best.get(way, seconds), seconds)

    try:
        for way in ("before", "inline", "pool"):
            once(way)  # warm-up: imports, the first runner
        best.clear()
        for _ in range(runs):
            for way in ("before", "inline", "pool"):
                once(way)
    finally:
        python_exec._compiled = cached
        isolation.pool().close()
        isolation.configure("inline")
    return best


def cold(steps: int, runs: int, folder: Path) -> float:
    """Seconds per task with a new runner process for every task (no pool)."""
    payload = _program(steps)
    isolation.configure("process", spare=0)
    isolation.MAX_USES = 1  # every task retires its runner
    try:
        _run(payload, folder, 10_000)
        return min(_run(payload, folder, 10_001 + i) for i in range(runs)) / steps
    finally:
        isolation.MAX_USES = 500
        isolation.pool().close()
        isolation.configure("inline")


def floor(rounds: int = 2000) -> float:
    from noetlc.stdlib_tools.registry import call_tool

    args = {"code": "result = x", "input": {"x": 5}}
    call_tool("python", args)
    started = time.perf_counter()
    for _ in range(rounds):
        call_tool("python", args)
    return (time.perf_counter() - started) / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="noetlc-bench-isolation-") as scratch:
        folder = Path(scratch)
        best = measure(args.steps, args.runs, folder)
        fresh = cold(max(10, args.steps // 10), max(3, args.runs // 2), folder)
    before = best["before"]
    print(f"python task call alone (inline, no VM): {floor() * 1e6:8.1f} µs")
    print(f"{args.steps}-step python chain, SQLite log, best per task of {args.runs} runs:")
    rows = [
        ("before: inline, code compiled per call", before),
        ("inline, compiled code cached", best["inline"]),
        ("after: pool (warm runner process)", best["pool"]),
        ("no pool: a new process per task", fresh),
    ]
    for name, value in rows:
        print(f"  {name:<40} {value * 1e6:9.1f} µs  ({value / before:.2f}× before)")


if __name__ == "__main__":
    main()
