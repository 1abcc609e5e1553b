"""The lint rules: one literal list, like the compiler's PIPELINE.

A rule with a `module` is a module of `noetlc.analysis.rules` with one entry point
`run(ctx: LintContext) -> None` that reports through `ctx.report`. A rule with `reported_by`
is a check the front end already makes (it is one of the lint rules a user expects, listed in docs/lint.md); `noetlc
lint` shows those diagnostics as they come from that pass instead of checking twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from noetlc.analysis.context import LintContext


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    name: str
    summary: str
    module: str | None = None  # noetlc.analysis.rules.<module>
    reported_by: str | None = None  # the compiler pass that reports it

    def entry(self) -> Callable[[LintContext], None]:
        assert self.module is not None
        fn: Callable[[LintContext], None] = import_module(
            f"noetlc.analysis.rules.{self.module}"
        ).run
        return fn


RULES: list[Rule] = [
    Rule("NOE501", "unreachable-step", "steps no path from the entry reaches", "unreachable"),
    Rule(
        "NOE502",
        "dead-arc",
        "arcs that can never fire (false, impossible event, shadowed)",
        "dead_arcs",
    ),
    Rule(
        "NOE203",
        "bad-jump-target",
        "jump targets that do not exist or cross pipelines",
        reported_by="resolve",
    ),
    Rule("NOE503", "jump-cycle-without-exit", "jump cycles only an error can leave", "jump_cycles"),
    Rule("NOE504", "join-deadlock", "AND-joins that can wait forever", "join_deadlock"),
    Rule(
        "NOE505",
        "no-option-to-complete",
        "states from which no final step is reachable",
        "completion",
    ),
    Rule("NOE506", "unbounded-tokens", "cycles through an inclusive fork", "unbounded"),
    Rule(
        "NOE507",
        "parallel-ctx-conflict",
        "set_ctx write conflicts in parallel loops",
        "ctx_conflicts",
    ),
    Rule("NOE305", "undefined-name", "names no scope defines", reported_by="expressions"),
    Rule("NOE508", "unused-keychain-entry", "keychain entries nothing uses", "unused_keychain"),
    Rule("NOE6xx", "tool-arguments", "tool arguments invalid for the kind", reported_by="tools"),
    Rule(
        "NOE509", "analysis-incomplete", "the state budget stopped the soundness search", "budget"
    ),
    Rule(
        "NOE510",
        "static-cycle-guard",
        "cycles whose exit guards read only workload and literals",
        "static_cycle",
    ),
    Rule("NOE511", "step-never-runs", "steps no explored execution starts", "never_runs"),
]


def checks() -> list[Rule]:
    return [r for r in RULES if r.module is not None]
