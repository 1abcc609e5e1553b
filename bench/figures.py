"""The figure convention: how a benchmark reports what `python -m bench` tabulates.

A benchmark (any `bench/test_bench_*.py` test using the `benchmark` fixture) calls
`record(benchmark, ...)` once per figure; each call appends one dict to
`benchmark.extra_info["figures"]` (pytest-benchmark stores extra_info in its JSON). Keys:

    figure         what was measured, e.g. "1,000-iteration noop loop, SQLite log"
    value, unit    the figure ("ms", "µs", "ns", "firings/s", "tasks/s", "B", "events", "×")
    better         "lower" or "higher": which way is good for this unit
    against        what it is compared with, measured in the same run: a peer
                   ("SpiffWorkflow"), a floor ("floor: raw SQLite append"), or None
    against_value  the comparison's figure, in the same unit
    ratio          value / against_value (computed here)
    target         optional {"on": "value"|"ratio", "op": "<"|"<="|">"|">=", "bound": x,
                   "text": "target: < 50 ms"}; the harness decides whether it is met
    fair           optional note on how fair the comparison is
    group          the table section (default: the test module's name without test_bench_)
    detail         optional dict kept in the JSON only (e.g. per-pass timings)

A hand-written benchmark may also put a single figure's keys directly in extra_info.
"""

from __future__ import annotations

import os
from typing import Any

QUICK_ENV = "NOETLC_BENCH_QUICK"


def quick() -> bool:
    """`python -m bench --quick` sets this: benchmarks use smaller sizes and fewer rounds."""
    return os.environ.get(QUICK_ENV) == "1"


def target(on: str, op: str, bound: float, text: str) -> dict[str, Any]:
    if on not in ("value", "ratio") or op not in OPS:
        raise ValueError(f"bad target {on!r} {op!r}")
    return {"on": on, "op": op, "bound": bound, "text": text}


OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def record(
    benchmark: Any,
    *,
    figure: str,
    value: float,
    unit: str,
    better: str = "lower",
    against: str | None = None,
    against_value: float | None = None,
    target: dict[str, Any] | None = None,
    fair: str | None = None,
    group: str | None = None,
    detail: dict[str, Any] | None = None,
) -> dict[str, Any]:
    if better not in ("lower", "higher"):
        raise ValueError(f"better must be 'lower' or 'higher', not {better!r}")
    entry: dict[str, Any] = {
        "figure": figure,
        "value": value,
        "unit": unit,
        "better": better,
        "against": against,
        "against_value": against_value,
        "ratio": value / against_value if against_value else None,
    }
    for key, extra in (("target", target), ("fair", fair), ("group", group), ("detail", detail)):
        if extra is not None:
            entry[key] = extra
    benchmark.extra_info.setdefault("figures", []).append(entry)
    return entry
