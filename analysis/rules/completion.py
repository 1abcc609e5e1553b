"""NOE505: reachable states from which no completion is reachable (option to complete)."""

from __future__ import annotations

from noetlc.analysis import soundness
from noetlc.analysis.context import LintContext


def run(ctx: LintContext) -> None:
    for finding in soundness.shared(ctx).of("trap"):
        message, trace = finding.witness()
        step = ctx.steps.get(finding.step)
        ctx.report(
            "NOE505",
            message,
            step.name_span if step is not None else None,
            trace=trace,
        )
