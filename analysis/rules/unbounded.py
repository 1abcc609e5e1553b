"""NOE506: tokens multiply without bound (a cycle through an inclusive fork, not its join)."""

from __future__ import annotations

from noetlc.analysis import soundness
from noetlc.analysis.context import LintContext


def run(ctx: LintContext) -> None:
    for finding in soundness.shared(ctx).of("unbounded"):
        message, trace = finding.witness()
        step = ctx.steps.get(finding.step)
        ctx.report(
            "NOE506",
            message,
            step.name_span if step is not None else None,
            trace=trace,
        )
