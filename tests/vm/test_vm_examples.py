"""Every playbook in examples/ compiles cleanly and runs to the result its comment promises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_file
from noetlc.runtime.embedded import run_embedded

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

EXPECTED: dict[str, Any] = {
    "hello": {"shout": "HELLO WORLD"},
    "loop": {
        "cities": 6,
        "best": "Perth",
        "total": 265,
        "scored": ["Kyiv", "Lima", "Nice", "Oslo", "Perth", "Pune"],
    },
    "retry": {"answered_on_attempt": 3},
    "fanout_join": {"biggest": 9, "evens": [4, 2, 6], "total": 31},
    "http_pagination": {"pages": 5, "count": 23, "sum": 253},
}


def test_every_example_has_an_expectation() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(name: str) -> None:
    unit = compile_file(str(EXAMPLES / f"{name}.yaml"))
    assert not unit.reporter.diagnostics, unit.reporter.sorted()
    summary = run_embedded(unit.payload)
    assert summary["status"] == "completed", summary["error"]
    assert summary["result"] == EXPECTED[name]
