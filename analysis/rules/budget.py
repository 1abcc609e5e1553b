"""NOE509: the explicit search stopped at `--budget-states` (the verdict is partial)."""

from __future__ import annotations

from noetlc.analysis import soundness
from noetlc.analysis.context import LintContext


def run(ctx: LintContext) -> None:
    result = soundness.shared(ctx)
    if not result.complete:
        entry = ctx.steps.get(ctx.net.entry_step)
        ctx.report(
            "NOE509",
            f"the soundness search stopped after {result.states} states (--budget-states "
            f"{ctx.budget_states}); {result.nodes} step(s) were left after the structural "
            "reduction",
            entry.name_span if entry is not None else None,
        )
