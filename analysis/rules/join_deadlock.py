"""NOE504: AND-joins that can wait forever (the soundness check's proper-completion part)."""

from __future__ import annotations

from noetlc.analysis import soundness
from noetlc.analysis.context import LintContext


def run(ctx: LintContext) -> None:
    for finding in soundness.shared(ctx).of("deadlock"):
        message, trace = finding.witness()
        step = ctx.steps.get(finding.step)
        ctx.report(
            "NOE504",
            message,
            step.name_span if step is not None else None,
            trace=trace,
        )
