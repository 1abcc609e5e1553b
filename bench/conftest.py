"""Benchmarks are opt-in: `pytest bench -m bench --benchmark-enable` (or `python -m bench`).

When `python -m bench` runs them it sets NOETLC_BENCH_OUTCOMES to a file; every skipped or
failed benchmark is appended there as one JSON line ({"test", "outcome", "reason"}), so the
harness can print why a figure is missing.
"""

from __future__ import annotations

import json
import os
from typing import Any

OUTCOMES_ENV = "NOETLC_BENCH_OUTCOMES"


def pytest_runtest_logreport(report: Any) -> None:
    path = os.environ.get(OUTCOMES_ENV)
    if not path or not (report.skipped or report.failed):
        return
    if report.skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
    else:
        lines = [line for line in str(report.longreprtext).splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("E ")]
        reason = (errors or lines or ["failed"])[-1].removeprefix("E ").strip()
    line = {"test": report.nodeid, "outcome": report.outcome, "when": report.when, "reason": reason}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
