"""From pytest-benchmark's JSON to the harness's own result file, and back for comparisons.

The result file (one JSON object, `schema: 1`):

    {"schema": 1, "command": "python -m bench --quick", "quick": true,
     "started": "2025-…Z", "duration_s": 212.4, "machine": {...},
     "figures": [{"group", "figure", "value", "unit", "better", "against", "against_value",
                  "ratio", "target", "met", "fair", "detail", "test"}],
     "benchmarks": [{"test", "median_s", "min_s", "rounds"}],
     "outcomes": [{"test", "outcome": "skipped"|"failed", "reason"}]}

`met` is true/false when the figure has a target, else null.
"""

from __future__ import annotations

from typing import Any

from noetlc.bench.figures import OPS

FIELDS = (
    "figure",
    "value",
    "unit",
    "better",
    "against",
    "against_value",
    "ratio",
    "target",
    "fair",
    "group",
    "detail",
)


def group_of(fullname: str) -> str:
    """`bench/test_bench_compile.py::test_x[a]` → `compile`."""
    module = fullname.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    return module.removeprefix("test_bench_")


def normalize(raw: dict[str, Any], test: str) -> dict[str, Any]:
    figure: dict[str, Any] = {key: raw.get(key) for key in FIELDS}
    figure["group"] = figure["group"] or group_of(test)
    figure["better"] = figure["better"] or "lower"
    figure["value"] = float(figure["value"])
    if figure["against_value"] is not None:
        figure["against_value"] = float(figure["against_value"])
    if figure["ratio"] is None and figure["against_value"]:
        figure["ratio"] = figure["value"] / figure["against_value"]
    figure["met"] = target_met(figure)
    figure["test"] = test
    return figure


def target_met(figure: dict[str, Any]) -> bool | None:
    goal = figure.get("target")
    if not goal:
        return None
    measured = figure["value"] if goal["on"] == "value" else figure.get("ratio")
    if measured is None:
        return None
    return bool(OPS[goal["op"]](measured, goal["bound"]))


def collect(pytest_json: dict[str, Any], outcomes: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures and raw timings of one pytest-benchmark run, plus skips and failures."""
    figures: list[dict[str, Any]] = []
    benchmarks: list[dict[str, Any]] = []
    for bench in pytest_json.get("benchmarks", []):
        test = bench["fullname"]
        info = bench.get("extra_info") or {}
        entries = list(info.get("figures") or [])
        if "figure" in info:
            entries.append(info)
        figures.extend(normalize(entry, test) for entry in entries)
        stats = bench.get("stats") or {}
        benchmarks.append(
            {
                "test": test,
                "median_s": stats.get("median"),
                "min_s": stats.get("min"),
                "rounds": stats.get("rounds"),
            }
        )
    return {
        "schema": 1,
        "figures": figures,
        "benchmarks": benchmarks,
        "outcomes": [o for o in outcomes if o.get("outcome") in ("skipped", "failed")],
    }


def unmet(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in result["figures"] if f.get("met") is False]


def key(figure: dict[str, Any]) -> tuple[str, str]:
    return (figure["group"], figure["figure"])
