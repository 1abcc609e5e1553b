"""NOE506: tokens multiply without bound (a cycle through an inclusive fork, not its join)."""

from __future__ import annotations

from noetlc.analysis import soundness
from noetlc.analysis.context import LintContext


def run(ctx: LintContext) -> None:
    for finding in soundness.shared(ctx).of("unbounded"):
        step = ctx.steps.get(finding.step)
        ctx.report(
            "NOE506",
            finding.message,
            step.name_span if step is not None else None,
            trace=finding.trace,
        )
