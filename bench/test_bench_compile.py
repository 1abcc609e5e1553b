"""Compile time by playbook size and shape, with the per-pass breakdown.

Run: `.venv/bin/python -m pytest bench/test_bench_compile.py -m bench -k table -q -s`
Target (DESIGN §5): linear growth, 10,000 steps in under 10 s. Wall-clock seconds per pass are
printed with the process's CPU seconds for the whole compilation beside the wall total (on a
shared machine the CPU figure is the one that does not depend on the other load).
Linear growth itself is asserted without timing by tests/compiler/test_compile_scaling.py.
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
SIZES = (100, 1_000, 5_000, 10_000)


def compile_timed(source: str) -> tuple[float, float, dict[str, float]]:
    """(wall seconds, CPU seconds, wall seconds per pass) of one compilation."""
    unit = CompilationUnit(file="bench.yaml", source=source)
    timings: dict[str, float] = {}
    start, cpu_start = time.perf_counter(), time.process_time()
    run_pipeline(unit, timings=timings)
    total, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    assert not unit.reporter.has_errors, unit.reporter.diagnostics[:3]
    return total, cpu, timings


def test_compile_time_table(capsys: pytest.CaptureFixture[str]) -> None:
    passes = pass_names()
    rows = []
    for shape, make in SHAPES.items():
        for n in SIZES:
            total, cpu, timings = compile_timed(make(n))
            rows.append((shape, n, total, cpu, timings))
    with capsys.disabled():
        head = "  ".join(f"{p[:9]:>9}" for p in passes)
        print(f"\nshape     steps   total s    cpu s  µs/step  {head}")
        for shape, n, total, cpu, timings in rows:
            cells = "  ".join(f"{timings.get(p, 0.0):>9.3f}" for p in passes)
            print(f"{shape:<8} {n:>6} {total:>9.3f} {cpu:>8.3f} {total / n * 1e6:>8.0f}  {cells}")


@pytest.mark.parametrize("shape", SHAPES)
def test_compile_1000_steps(benchmark: object, shape: str) -> None:
    source = SHAPES[shape](1_000)
    benchmark(lambda: compile_timed(source))  # type: ignore[operator]
