"""Compile time by playbook size and shape, with the per-pass breakdown.

Run: `python -m bench -k compile` (the per-pass times are in the result's `detail`).
Target: linear growth, 10,000 steps in under 10 s. Each size is compared with
the floor of loading the same text with PyYAML (the loader the compiler's first pass uses).
Every compilation starts with an empty expression cache, like a fresh `noetlc compile`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from noetlc.bench.figures import quick, record, target
from noetlc.bench.generators import chain, fanout, guards, loops
from noetlc.compiler.pipeline import run_pipeline
from noetlc.compiler.unit import CompilationUnit
from noetlc.expr.compile import _compile_cached

pytestmark = pytest.mark.bench

SHAPES: dict[str, Callable[[int], str]] = {
    "chain": chain,
    "fanout": fanout,
    "loops": loops,
    "guards": guards,
}
LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def sizes(shape: str) -> tuple[int, ...]:
    if quick():
        return (100, 1_000)
    # one router of n guarded arcs grows faster than linearly; 10,000 would take minutes
    return (100, 1_000, 3_000) if shape == "guards" else (100, 1_000, 10_000)


def compile_timed(source: str) -> tuple[float, dict[str, float]]:
    """One compilation as `noetlc compile` runs it in a fresh process: the expression cache is
    emptied first. Otherwise the repeated small sizes hit the cache their first run filled
    while the largest size (compiled once) does not, and the growth figure compares a cached
    compile with an uncached one (the guards shape: 1.2 ms vs 500 ms in `expressions`)."""
    _compile_cached.cache_clear()
    unit = CompilationUnit(file="bench.yaml", source=source)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    run_pipeline(unit, timings=timings)
    total = time.perf_counter() - start
    assert not unit.reporter.has_errors, unit.reporter.diagnostics[:3]
    return total, timings


def yaml_floor(source: str) -> float:
    start = time.perf_counter()
    yaml.load(source, Loader=LOADER)
    return time.perf_counter() - start


@pytest.mark.parametrize("shape", SHAPES)
def test_compile_growth(benchmark: Any, shape: str) -> None:
    """Every size of one shape: a figure per size (ms, against PyYAML's load of the same
    text, with the per-pass times in `detail`) and the growth of µs/step from the smallest
    to the largest size (linear = 1×)."""
    per_step: dict[int, tuple[float, float]] = {}
    sources = {n: SHAPES[shape](n) for n in sizes(shape)}
    largest = max(sources)
    timed = benchmark.pedantic(compile_timed, args=(sources[largest],), rounds=1, iterations=1)
    for n, source in sources.items():
        if n == largest:  # compiled once above (10,000 steps take seconds)
            best, timings = timed
            floor = min(yaml_floor(source) for _ in range(2))
        else:
            runs = [compile_timed(source) for _ in range(3)]
            best, timings = min(runs, key=lambda r: r[0])
            floor = min(yaml_floor(source) for _ in range(3))
        per_step[n] = (best / n, floor / n)
        goal = None
        if n == 10_000:
            goal = target("value", "<", 10_000, "target: 10,000 steps < 10 s")
        record(
            benchmark,
            figure=f"compile {shape}, {n:,} steps",
            value=best * 1e3,
            unit="ms",
            against="floor: PyYAML load of the same text",
            against_value=floor * 1e3,
            target=goal,
            group="compile",
            detail={"passes_ms": {p: round(t * 1e3, 3) for p, t in timings.items()}, "steps": n},
        )
    small = min(per_step)
    record(
        benchmark,
        figure=f"compile {shape}: µs/step at {largest:,} ÷ at {small:,}",
        value=per_step[largest][0] / per_step[small][0],
        unit="×",
        against="floor: the same growth of PyYAML load",
        against_value=per_step[largest][1] / per_step[small][1],
        target=target("value", "<=", 2, "target: linear (≤ 2×)"),
        group="compile",
    )
