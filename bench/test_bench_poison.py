"""Poison executions and runaway expressions (`bench/poison.py`, docs/expressions.md "Limits").

Run: `python -m bench -k poison` (or pytest: `-m bench --benchmark-enable`). Figures: the
delay a poison execution causes a healthy one submitted 2 s later on the same server (target
≤ 1 s), and the peak memory of each runaway payload's evaluation (target ≤ 64 MB above the
interpreter). Each runs in a child process under a 2 GB address-space cap.
"""

from __future__ import annotations

from typing import Any

import pytest

from noetlc.bench import poison
from noetlc.bench.figures import record, target

pytestmark = pytest.mark.bench


def test_poison_execution_delay(benchmark: Any) -> None:
    out: dict[str, Any] = {}

    def run() -> None:
        out.update(poison.poison())

    benchmark.pedantic(run, rounds=1, iterations=1)
    for kind in poison.POISON_GUARDS:
        result = out[kind]
        assert result.get("poison_code") == "NOE311", result
        assert result.get("healthy") == "completed", result
        record(
            benchmark,
            figure=f"delay a poison execution ({kind}) causes a healthy one",
            value=result["delay_s"],
            unit="s",
            target=target("value", "<=", 1.0, "target: ≤ 1 s"),
            detail={"poison_failed_after_s": result.get("poison_s"), "alone": out["alone"]},
            group="poison",
        )


def test_runaway_payloads_peak_memory(benchmark: Any) -> None:
    rows: list[dict[str, Any]] = []

    def run() -> None:
        rows[:] = poison.runaway()

    benchmark.pedantic(run, rounds=1, iterations=1)
    for row in rows:
        assert str(row.get("outcome", "")).startswith("NOE311"), row
        record(
            benchmark,
            figure=f"peak RSS of the runaway payload {row['payload']}",
            value=row["peak_mb"] * 2**20,
            unit="B",
            target=target("value", "<=", 96 * 2**20, "target: ≤ 64 MB above the interpreter's ~30"),
            detail=row,
            group="poison",
        )
