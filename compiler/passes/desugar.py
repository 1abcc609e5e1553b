"""Pass `desugar`: legacy forms -> the canonical document (docs/migration.md).

Reads `unit.document`, writes `unit.canonical`. Each construct has its own module in
`compiler/desugar/` with one entry point `run(doc, reporter) -> doc`; they run in the order of
`DESUGAR_PASSES`. Rewritten nodes keep the span of what the user wrote; every rewrite is
reported as a NOE4xx warning. `noetlc migrate` prints the result as YAML.
"""

from __future__ import annotations

from noetlc.compiler.desugar import (
    arc_events,
    case,
    labelled_tasks,
    loop_keys,
    retry,
    root_identity,
    routing_steps,
    sink,
    step_when,
    sugar,
    vars_block,
)
from noetlc.compiler.desugar.common import Pass
from noetlc.compiler.unit import CompilationUnit

DESUGAR_PASSES: list[tuple[str, Pass]] = [
    ("root_identity", root_identity.run),
    ("labelled_tasks", labelled_tasks.run),
    ("routing_steps", routing_steps.run),
    ("step_when", step_when.run),
    ("loop_keys", loop_keys.run),
    ("retry", retry.run),
    ("vars_block", vars_block.run),
    ("sink", sink.run),
    ("case", case.run),
    ("arc_events", arc_events.run),
    ("sugar", sugar.run),
]


def run(unit: CompilationUnit) -> None:
    doc = unit.document
    if doc is None:
        return
    for _, desugar in DESUGAR_PASSES:
        doc = desugar(doc, unit.reporter)
    unit.canonical = doc
