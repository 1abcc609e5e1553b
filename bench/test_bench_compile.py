"""Compile time by playbook size and shape, with the per-pass breakdown.

Run: `.venv/bin/python -m pytest bench/test_bench_compile.py -m bench -q -s`
Target (DESIGN §5): linear growth, 10,000 steps in under 10 s.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from noetlc.bench.generators import chain, fanout, loops
from noetlc.compiler.pipeline import pass_names, run_pipeline
from noetlc.compiler.unit import CompilationUnit

pytestmark = pytest.mark.bench

SHAPES: dict[str, Callable[[int], str]] = {"chain": chain, "fanout": fanout, "loops": loops}
SIZES = (10, 100, 1_000, 10_000)


def compile_timed(source: str) -> tuple[float, dict[str, float]]:
    unit = CompilationUnit(file="bench.yaml", source=source)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    run_pipeline(unit, timings=timings)
    total = time.perf_counter() - start
    assert not unit.reporter.has_errors, unit.reporter.diagnostics[:3]
    return total, timings


def test_compile_time_table(capsys: pytest.CaptureFixture[str]) -> None:
    passes = pass_names()
    rows = []
    for shape, make in SHAPES.items():
        for n in SIZES:
            total, timings = compile_timed(make(n))
            rows.append((shape, n, total, timings))
    with capsys.disabled():
        print("\nshape     steps   total s  µs/step  " + "  ".join(f"{p[:9]:>9}" for p in passes))
        for shape, n, total, timings in rows:
            cells = "  ".join(f"{timings.get(p, 0.0):>9.3f}" for p in passes)
            print(f"{shape:<8} {n:>6} {total:>9.3f} {total / n * 1e6:>8.0f}  {cells}")


@pytest.mark.parametrize("shape", SHAPES)
def test_compile_1000_steps(benchmark: object, shape: str) -> None:
    source = SHAPES[shape](1_000)
    benchmark(lambda: compile_timed(source))  # type: ignore[operator]
