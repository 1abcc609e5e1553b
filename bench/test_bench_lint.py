"""Lint time by playbook size and shape, beside the plain reachability graph of the same net.

Run: `.venv/bin/python -m pytest bench/test_bench_lint.py -m bench -q -s`
Target: 1,000 steps linted in under 2 s. Columns: lint s (compile to the net + every
rule), states (explored by the soundness search after the structural reduction), explicit s /
states (the search alone on the whole token system, with stubborn sets), plain states (the
same search without partial-order reduction, budget 200,000), pm4py s (its reachability graph
of the same token system as a plain P/T net (`_token_system`), in a throw-away venv under
/tmp; pm4py is AGPL-3.0 and never a dependency).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from itertools import product
from pathlib import Path
from typing import Any

import pytest

from noetlc.analysis import model
from noetlc.analysis.context import LintContext
from noetlc.analysis.lint import context_of, lint_unit
from noetlc.analysis.soundness import check
from noetlc.bench.figures import quick, record, target
from noetlc.bench.generators import chain, fanout, structured, wide_fanout
from noetlc.compiler.pipeline import compile_source

pytestmark = pytest.mark.bench

VENV = Path("/tmp/noetlc-bench-pm4py")
PM4PY_TIMEOUT = 60.0
PLAIN_BUDGET = 200_000
SHAPES: dict[str, Callable[[int], str]] = {
    "chain": chain,
    "fanout": lambda n: fanout(n, width=8),
    # nesting deep enough to reach n steps (the default depth caps it near 350)
    "structured": lambda n: structured(n, seed=1, max_depth=64),
}
SIZES = (100, 1_000) if quick() else (100, 1_000, 10_000)
WIDTHS = (4, 8) if quick() else (4, 8, 12, 16)

PM4PY_SCRIPT = r"""
import json, sys, time
from pm4py.objects.petri_net.obj import PetriNet, Marking
from pm4py.objects.petri_net.utils import petri_utils
from pm4py.objects.petri_net.utils.reachability_graph import construct_reachability_graph
data = json.load(sys.stdin)
net = PetriNet(data["name"])
places = {p: PetriNet.Place(p) for p in data["places"]}
for p in places.values():
    net.places.add(p)
for tid, consume, produce in data["transitions"]:
    t = PetriNet.Transition(tid, tid)
    net.transitions.add(t)
    for p in consume:
        petri_utils.add_arc_from_to(places[p], t, net)
    for p in produce:
        petri_utils.add_arc_from_to(t, places[p], net)
im = Marking()
for p, n in data["marking"].items():
    im[places[p]] = n
start = time.perf_counter()
ts = construct_reachability_graph(net, im)
print(json.dumps({"seconds": time.perf_counter() - start, "states": len(ts.states)}))
"""


def _pm4py() -> tuple[Path | None, str]:
    python = VENV / "bin" / "python"
    if python.exists():
        return python, ""
    try:
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=120)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "pm4py"],
            check=True,
            timeout=900,
            capture_output=True,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"pm4py did not install: {type(exc).__name__}"
    return python, ""


def _token_system(ctx: LintContext) -> dict[str, Any]:
    """The token system the soundness check explores (`analysis/model.py`), as a plain
    place/transition net: places are (place, colour) slots; one transition per outcome of a
    step (failures left out: they end the execution), per dead-token rule, and per colour choice of
    a join's branches that something can produce. The plain net of the IR would not do: an
    inclusive fork there is several route transitions on one decision token (the control VM
    fires every matching arc at once), so a P/T reachability graph never forks it."""
    system = model.build(ctx)
    produced = {s for outs in system.outcomes.values() for o in outs for s, _ in o.prods}
    produced |= {s for rule in system.dead_rules.values() for s, _ in rule}
    places: set[str] = set()
    transitions: list[list[Any]] = []

    def name(slot: int) -> str:
        places.add(f"{slot}")
        return f"{slot}"

    for node, outcomes in system.outcomes.items():
        for i, o in enumerate(outcomes):
            if o.end != 0:
                continue  # a failure ends the execution: the search counts no state after it
            produce = [name(s) for s, c in o.prods for _ in range(c)]
            transitions.append([f"o{node}_{i}", [name(2 * node)], produce])
    for node, rule in system.dead_rules.items():
        produce = [name(s) for s, c in rule for _ in range(c)]
        transitions.append([f"d{node}", [name(2 * node + 1)], produce])
    for join_entry, join in system.joins.items():
        colours = [[2 * b + c for c in (0, 1) if 2 * b + c in produced] for b in join.branches]
        for i, chosen in enumerate(product(*colours)):
            out = 2 * join_entry + (0 if any(s % 2 == 0 for s in chosen) else 1)
            transitions.append([f"j{join_entry}_{i}", [name(s) for s in chosen], [name(out)]])
    return {
        "name": ctx.net.name,
        "places": sorted(places),
        "transitions": transitions,
        "marking": {name(2 * system.initial): 1},
    }


def _pm4py_seconds(python: Path | None, ctx: LintContext) -> str:
    if python is None:
        return "-"
    data = _token_system(ctx)
    try:
        out = subprocess.run(
            [str(python), "-c", PM4PY_SCRIPT],
            input=json.dumps(data),
            capture_output=True,
            text=True,
            timeout=PM4PY_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return f">{PM4PY_TIMEOUT:.0f}"
    if out.returncode != 0:
        return "error"
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return f"{result['seconds']:.3f} ({result['states']} st)"


def _row(name: str, n: int, source: str, python: Path | None) -> str:
    start = time.perf_counter()
    unit = compile_source(source, until="net")
    report = lint_unit(unit)
    lint_s = time.perf_counter() - start
    assert report.soundness is not None
    assert unit.playbook is not None
    steps = len(unit.playbook.workflow)
    ctx = context_of(unit, budget=PLAIN_BUDGET)
    assert ctx is not None
    t0 = time.perf_counter()
    explicit = check(ctx, reduce=False)
    explicit_s = time.perf_counter() - t0
    plain = check(ctx, reduce=False, por=False) if n <= 1_000 else None
    plain_states = (
        "-" if plain is None else f"{plain.states}{'' if plain.complete else '+ (budget)'}"
    )
    pm4py = _pm4py_seconds(python, ctx) if n <= 1_000 else "-"
    return (
        f"{name:<12} {steps:>6} {lint_s:>8.3f} {report.soundness.states:>7} "
        f"{explicit_s:>10.3f} {explicit.states:>8} {plain_states:>16}  {pm4py}"
    )


def test_lint_time_table(capsys: pytest.CaptureFixture[str]) -> None:
    python, why = (None, "--quick run") if quick() else _pm4py()
    rows = []
    for shape, make in SHAPES.items():
        for n in SIZES:
            rows.append(_row(shape, n, make(n), python))
    for width in WIDTHS:
        rows.append(_row(f"wide x{width}", width * 2 + 2, wide_fanout(width), python))
    with capsys.disabled():
        if python is None:
            print(f"\npm4py skipped: {why}")
        print("\nshape         steps   lint s  states  explicit s  states    plain states  pm4py s")
        for row in rows:
            print(row)


@pytest.mark.parametrize("n", (1_000,) if quick() else (1_000, 10_000))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_lint_time(benchmark: Any, shape: str, n: int) -> None:
    source = SHAPES[shape](n)
    playbook = compile_source(source, until="net").playbook
    assert playbook is not None
    steps = len(playbook.workflow)
    times: list[float] = []

    def lint_once() -> None:
        start = time.perf_counter()
        lint_unit(compile_source(source, until="net"))
        times.append(time.perf_counter() - start)

    benchmark.pedantic(lint_once, rounds=3 if n <= 1_000 else 1, iterations=1)
    record(
        benchmark,
        figure=f"lint, {shape} playbook of {steps:,} steps (compile to the net + every rule)",
        value=min(times) * 1000,
        unit="ms",
        better="lower",
        target=target("value", "<", 2000, "target: < 2 s for 1,000 steps") if n <= 1_000 else None,
        group="lint",
    )
