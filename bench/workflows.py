"""The reference workflows (100-step noop chain, 1,000-iteration noop loop, 1,000 exclusive
decisions) on our side: compiled once, run end to end by `run_embedded`."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from noetlc.bench import generators
from noetlc.compiler.pipeline import compile_source
from noetlc.ir.program import Program
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import EventStore
from noetlc.runtime.store_url import open_store

# name -> (playbook generator, size, tool calls per run: the floor of events)
WORKFLOWS: dict[str, tuple[Callable[[int], str], int]] = {
    "chain": (generators.noop_chain, 100),
    "loop": (generators.big_loop, 1_000),
    "decisions": (generators.decisions, 1_000),
}
LABELS = {
    "chain": "{n:,}-step noop chain",
    "loop": "{n:,}-iteration noop loop",
    "decisions": "{n:,} exclusive decisions (guarded self-loop)",
}


def label(name: str, n: int) -> str:
    return LABELS[name].format(n=n)


def tool_calls(name: str, n: int) -> int:
    """Tool calls in one run: every step run and loop iteration calls its noop tool once."""
    return {"chain": n, "loop": n + 1, "decisions": n + 2}[name]


def payload(name: str, n: int | None = None) -> Program:
    make, default = WORKFLOWS[name]
    unit = compile_source(make(default if n is None else n), f"{name}.yaml")
    if unit.reporter.has_errors:
        raise AssertionError(unit.reporter.diagnostics[:3])
    assert unit.program is not None
    return unit.program  # the compiler's verified program: loaded as is, like `noetl-vm run`


def run(compiled: Program, store: EventStore | None) -> dict[str, Any]:
    summary = run_embedded(compiled, None, store)
    if summary["status"] != "completed":
        raise AssertionError(summary.get("error"))
    return summary


def best_ms(compiled: Program, kind: str, repeat: int) -> tuple[float, dict[str, Any]]:
    """Best wall time of `repeat` runs with a fresh store of `kind` ("memory" or "sqlite",
    one database file per run, like one `noetl-vm run`) and the last summary."""
    best = float("inf")
    summary: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="noetlc-bench-") as scratch:
        for i in range(repeat):
            url = "memory:" if kind == "memory" else f"sqlite:///{Path(scratch) / f'{i}.db'}"
            store = open_store(url)
            start = time.perf_counter()
            summary = run(compiled, store)
            best = min(best, time.perf_counter() - start)
            store.close()
    return best * 1e3, summary
