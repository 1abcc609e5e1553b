"""Compile time grows linearly with the playbook, checked without timing anything.

* Every pass makes a number of function calls proportional to the number of steps: a pass
  that became quadratic would make ~4x more calls per step on a 4x larger playbook.
* The cyclic garbage collector never runs during a compilation (its full collections rescan
  every live object, which made compile time superlinear), and the passes leave no cyclic
  garbage behind for it.
* The loader visits each YAML event once: an alias reuses its anchor's node, so a document
  of nested aliases ("billion laughs") loads as a small shared tree.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from noetlc.bench.generators import chain, fanout, guards, loops
from noetlc.compiler.passes.load import load
from noetlc.compiler.pipeline import PIPELINE, compile_source, pass_names, run_pipeline
from noetlc.compiler.unit import CompilationUnit
from noetlc.compiler.ynodes import YMap, YSeq
from noetlc.diagnostics.report import Reporter
from noetlc.expr.compile import _compile_cached, compile_expression

SHAPES: dict[str, Callable[[int], str]] = {
    "guards": guards,  # one exclusive router of n guarded arcs (each negates the earlier ones)
    "chain": chain,
    "fanout": fanout,
    "loops": loops,
}


def _calls_per_pass(source: str) -> tuple[int, dict[str, int]]:
    """(steps, function calls made by each pass) for one compilation."""
    _compile_cached.cache_clear()  # the expression cache would hide the work of `expressions`
    unit = CompilationUnit(file="scale.yaml", source=source)
    counts: dict[str, int] = {}
    for p in PIPELINE:
        entry = p.entry()
        calls = 0

        def count(frame: FrameType, event: str, arg: Any) -> None:
            nonlocal calls
            calls += 1

        sys.setprofile(count)
        try:
            entry(unit)
        finally:
            sys.setprofile(None)
        counts[p.name] = calls
    assert not unit.reporter.has_errors, unit.reporter.diagnostics[:3]
    assert unit.document is not None
    workflow = unit.document.get("workflow")
    assert isinstance(workflow, YSeq)
    return len(workflow), counts


@pytest.mark.parametrize("shape", SHAPES)
def test_every_pass_makes_calls_linear_in_the_steps(shape: str) -> None:
    make = SHAPES[shape]
    compile_source(make(10))  # one-time work (grammar tables, imports) stays out of the count
    small_steps, small = _calls_per_pass(make(40))
    large_steps, large = _calls_per_pass(make(160))
    growth = large_steps / small_steps
    for name, calls in large.items():
        assert calls <= 1.1 * growth * max(small[name], 1), (
            f"pass {name}: {small[name]} calls for {small_steps} steps, {calls} for "
            f"{large_steps} ({calls / max(small[name], 1):.1f}x for {growth:.1f}x the steps)"
        )


@pytest.mark.parametrize("shape", SHAPES)
def test_no_garbage_collection_during_a_compilation(shape: str) -> None:
    """A cold compile, as `noetlc compile` runs it: the expression cache starts empty, so the
    expression code generation runs too (independent of what earlier tests compiled)."""
    compile_source(chain(3))  # one-time work (grammar tables, imports) stays out of it
    collections: list[int] = []
    seen_by_pass: dict[str, int] = {}

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    def after_pass(name: str, unit: CompilationUnit) -> None:
        seen_by_pass[name] = len(collections)

    unit = CompilationUnit(file="gc.yaml", source=SHAPES[shape](60))
    threshold = gc.get_threshold()
    _compile_cached.cache_clear()
    gc.collect()
    gc.callbacks.append(record)
    gc.set_threshold(10)  # a collection every 10 allocations, were the collector running
    try:
        run_pipeline(unit, after_each=after_pass)
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(record)
    assert not unit.reporter.has_errors
    assert list(seen_by_pass) == pass_names()
    assert set(seen_by_pass.values()) == {0}
    assert gc.isenabled()
    del unit
    assert gc.collect() == 0  # the passes created no reference cycles to leave behind


@pytest.mark.parametrize(
    "text",
    [
        "{{ 'tab\\there' ~ workload.x }}",  # an escaped string literal
        "{{ [1, 2] | length > 1 }}",  # no names: folded at compile time
        "{{ workload.a }}-{{ workload.b }}",  # mixed text
    ],
)
def test_compiling_an_expression_leaves_no_reference_cycles(text: str) -> None:
    _compile_cached.cache_clear()
    gc.collect()
    compile_expression(text, mode="template")
    _compile_cached.cache_clear()
    assert gc.collect() == 0


def test_gc_state_is_restored_when_it_was_disabled() -> None:
    gc.disable()
    try:
        compile_source(chain(3))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_aliases_share_their_anchor_node() -> None:
    # Five levels of ten aliases: 200,000 leaves if each alias were copied (a deeper bomb is
    # refused with NOE007: tests/hostile/test_yaml_safe.py).
    lines = ["l0: &l0 [x, y]"]
    for level in range(1, 6):
        refs = ", ".join([f"*l{level - 1}"] * 10)
        lines.append(f"l{level}: &l{level} [{refs}]")
    reporter = Reporter()
    doc = load("\n".join(lines) + "\n", "laughs.yaml", reporter)
    assert doc is not None and reporter.diagnostics == []
    top = doc.get("l5")
    assert isinstance(top, YSeq) and len(top) == 10
    assert all(item is top.items[0] for item in top.items)
    assert top.items[0] is doc.get("l4")


def test_alias_diagnostics_are_reported_once() -> None:
    reporter = Reporter()
    doc = load("a: &a {x: on}\nb: *a\nc: *a\n", "t.yaml", reporter)
    assert isinstance(doc, YMap)
    assert [d.code for d in reporter.diagnostics] == ["NOE003"]
