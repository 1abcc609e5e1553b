"""Pass `desugar`: legacy forms -> the canonical document (docs/migration.md).

Reads `unit.document`, writes `unit.canonical`. Each construct has its own module in
`compiler/desugar/` (the `case:` block: the `compiler/desugar/case/` subpackage) with one entry
point `run(doc, reporter) -> doc`; `REWRITES` names every rewrite once, in the order they run.
Rewritten nodes keep the span of what the user wrote; every rewrite is reported as a NOE4xx
warning. `noetlc migrate` prints the result as YAML.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import import_module

from noetlc.compiler.desugar.common import Pass
from noetlc.compiler.unit import CompilationUnit


@dataclass(frozen=True, slots=True)
class Rewrite:
    """One rewrite: `function` of the module `noetlc.compiler.desugar.<module>`."""

    name: str
    module: str
    function: str = "run"
    # a legacy form only `noetlc migrate` rewrites (the `migrate` option): `check` rejects it
    # with the hint to run `migrate` (NOE105, NOE206); a compile without the option does not
    # import its module
    migrate_only: bool = False
    # a rewrite of NoETL's own canonical constructs: `noetlc migrate` prints them as written
    # (the `print` option), since NoETL runs them; a compile always applies it
    canonical: bool = False


REWRITES: tuple[Rewrite, ...] = (
    Rewrite("root_identity", "root_identity"),
    Rewrite("labelled_tasks", "labelled_tasks"),
    # the migrate-only forms run right after the named-key tasks are flattened
    Rewrite("eval_rules", "eval_rules", migrate_only=True),
    Rewrite("root_vars", "root_vars", migrate_only=True),
    Rewrite("pipe", "pipes", migrate_only=True),
    Rewrite("next_then", "next_then", migrate_only=True),
    Rewrite("type_kind", "routing_steps", "type_kind", migrate_only=True),
    Rewrite("tool_kind", "routing_steps", "tool_kind", migrate_only=True),
    Rewrite("routing_only", "routing_steps", "run_all", migrate_only=True),
    Rewrite("tracing", "unsupported", "drop_tracing", migrate_only=True),
    Rewrite("routing_steps", "routing_steps"),
    Rewrite("spellings", "spellings"),
    Rewrite("unsupported", "unsupported"),
    Rewrite("step_when", "step_when"),
    Rewrite("loop_keys", "loop_keys"),
    Rewrite("loop_vars", "loop_vars", canonical=True),
    # before `case` and `vars` are rewritten: it applies to playbooks in their form
    Rewrite("result_key", "result_key"),
    # before `vars`, `sink` and `case`, which add their rules and tasks around the call's
    Rewrite("retry", "retry"),
    Rewrite("vars_block", "vars_block"),
    Rewrite("sink", "sink"),
    Rewrite("case", "case.block"),
    Rewrite("arc_events", "arc_events"),
    # after `case` and `vars` (which bind `result` to the step's own call), before the sugar
    Rewrite("incoming_result", "incoming_result"),
    Rewrite("sugar", "sugar"),
    # after the sugar: the step's tasks are plain tasks it can name and route between
    Rewrite("cursor_loop", "cursor_loop", canonical=True),
)


def _function(rewrite: Rewrite) -> Pass:
    module = import_module(f"noetlc.compiler.desugar.{rewrite.module}")
    fn: Pass = getattr(module, rewrite.function)
    return fn


@functools.cache
def passes(migrate: bool = False, keep_canonical: bool = False) -> tuple[tuple[str, Pass], ...]:
    """The rewrites a compile runs, in order, their modules imported: with `migrate`, the
    migrate-only ones too; with `keep_canonical`, not those of NoETL's canonical constructs."""
    return tuple(
        (r.name, _function(r))
        for r in REWRITES
        if (migrate or not r.migrate_only) and not (keep_canonical and r.canonical)
    )


def migrate_passes() -> list[tuple[str, Pass]]:
    """The `migrate`-only rewrites, in order, their modules imported."""
    return [(r.name, _function(r)) for r in REWRITES if r.migrate_only]


def run(unit: CompilationUnit) -> None:
    doc = unit.document
    if doc is None:
        return
    options = unit.options
    for _, desugar in passes(bool(options.get("migrate")), bool(options.get("print"))):
        doc = desugar(doc, unit.reporter)
    unit.canonical = doc
