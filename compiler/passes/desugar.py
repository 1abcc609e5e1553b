"""Pass `desugar`: legacy forms -> the canonical document (docs/migration.md).

Reads `unit.document`, writes `unit.canonical`. Each construct has its own module in
`compiler/desugar/` with one entry point `run(doc, reporter) -> doc`; they run in the order of
`DESUGAR_PASSES`. Rewritten nodes keep the span of what the user wrote; every rewrite is
reported as a NOE4xx warning. `noetlc migrate` prints the result as YAML.
"""

from __future__ import annotations

from importlib import import_module

from noetlc.compiler.desugar import (
    arc_events,
    case,
    cursor_loop,
    incoming_result,
    labelled_tasks,
    loop_keys,
    loop_vars,
    retry,
    root_identity,
    routing_steps,
    sink,
    spellings,
    step_when,
    sugar,
    unsupported,
    vars_block,
)
from noetlc.compiler.desugar.common import Pass
from noetlc.compiler.unit import CompilationUnit

DESUGAR_PASSES: list[tuple[str, Pass]] = [
    ("root_identity", root_identity.run),
    ("labelled_tasks", labelled_tasks.run),
    ("routing_steps", routing_steps.run),
    ("spellings", spellings.run),
    ("unsupported", unsupported.run),
    ("step_when", step_when.run),
    ("loop_keys", loop_keys.run),
    ("loop_vars", loop_vars.run),
    ("retry", retry.run),
    ("vars_block", vars_block.run),
    ("sink", sink.run),
    ("case", case.run),
    # a task a `case` rule runs may carry its own `retry:` (it is a task of the pipeline now)
    ("retry_case_tasks", retry.run),
    ("arc_events", arc_events.run),
    # after `case` and `vars` (which bind `result` to the step's own call), before the sugar
    ("incoming_result", incoming_result.run),
    ("sugar", sugar.run),
    # after the sugar: the step's tasks are plain tasks it can name and route between
    ("cursor_loop", cursor_loop.run),
]


# Legacy forms that only `noetlc migrate` rewrites (the `migrate` option): `check` rejects
# them in a file with the hint to run `migrate` (NOE105, NOE206). They run right after the
# named-key tasks are flattened, before every other rewrite. Named as (module, function) in
# `noetlc.compiler.desugar`: a compile without the option does not import them.
MIGRATE_PASSES: list[tuple[str, str, str]] = [
    ("eval_rules", "eval_rules", "run"),
    ("root_vars", "root_vars", "run"),
    ("pipe", "pipes", "run"),
    ("next_then", "next_then", "run"),
    ("type_kind", "routing_steps", "type_kind"),
    ("tool_kind", "routing_steps", "tool_kind"),
    ("routing_only", "routing_steps", "run_all"),
    ("tracing", "unsupported", "drop_tracing"),
]


def migrate_passes() -> list[tuple[str, Pass]]:
    """The `migrate`-only rewrites, their modules imported."""
    out: list[tuple[str, Pass]] = []
    for name, module, function in MIGRATE_PASSES:
        fn: Pass = getattr(import_module(f"noetlc.compiler.desugar.{module}"), function)
        out.append((name, fn))
    return out


# Rewrites of NoETL's own canonical constructs: `noetlc migrate` prints them as written (the
# `print` option), since NoETL runs them; a compile always applies them.
CANONICAL_REWRITES = frozenset({"cursor_loop", "loop_vars"})


def run(unit: CompilationUnit) -> None:
    doc = unit.document
    if doc is None:
        return
    passes = DESUGAR_PASSES
    if unit.options.get("migrate"):
        passes = [*DESUGAR_PASSES[:2], *migrate_passes(), *DESUGAR_PASSES[2:]]
    if unit.options.get("print"):
        passes = [p for p in passes if p[0] not in CANONICAL_REWRITES]
    for _, desugar in passes:
        doc = desugar(doc, unit.reporter)
    unit.canonical = doc
