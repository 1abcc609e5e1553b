"""Check time: `noetlc check` (the front end: load, schema, desugar, normalize, resolve,
expressions) on large, guard-heavy, payload-heavy and composed playbooks.

Run: `python -m bench -k check`. Each figure is compared with the floor of loading the same
text with PyYAML.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from noetlc.bench.figures import quick, record
from noetlc.bench.generators import chain, guards, nested, payload
from noetlc.cli.noetlc_commands.check import _check_until
from noetlc.compiler.pipeline import compile_source

pytestmark = pytest.mark.bench

LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def workloads() -> dict[str, Callable[[], dict[str, str]]]:
    n = 300 if quick() else 1_000
    kib = 128 if quick() else 512
    return {
        f"chain of {n:,} steps": lambda: {"chain.yaml": chain(n)},
        f"{n // 2} guarded arcs + admissions + policy rules": lambda: {"g.yaml": guards(n // 2)},
        f"workload of {kib} KiB": lambda: {"p.yaml": payload(kib)},
        "20 nested sub-playbooks": lambda: nested(20),
    }


def lint(files: dict[str, str]) -> float:
    until = _check_until()
    start = time.perf_counter()
    for name, source in files.items():
        unit = compile_source(source, name, until=until)
        assert not unit.reporter.has_errors, unit.reporter.diagnostics[:3]
    return time.perf_counter() - start


def floor(files: dict[str, str]) -> float:
    start = time.perf_counter()
    for source in files.values():
        yaml.load(source, Loader=LOADER)
    return time.perf_counter() - start


@pytest.mark.parametrize("name", list(workloads()))
def test_lint(benchmark: Any, name: str) -> None:
    files = workloads()[name]()
    benchmark.pedantic(lint, args=(files,), rounds=3, iterations=1)
    record(
        benchmark,
        figure=f"check: {name}",
        value=benchmark.stats.stats.min * 1e3,
        unit="ms",
        against="floor: PyYAML load of the same text",
        against_value=min(floor(files) for _ in range(3)) * 1e3,
        detail={"bytes": sum(len(s) for s in files.values()), "files": len(files)},
    )
