"""NOE511: steps arcs lead to that no explored execution starts (the soundness search's
"no dead transitions" property, per step). Only reported when the search was complete and
exact: a budget stop or an approximated decision would make it a guess."""

from __future__ import annotations

from noetlc.analysis import soundness
from noetlc.analysis.context import LintContext


def run(ctx: LintContext) -> None:
    result = soundness.shared(ctx)
    if not result.complete or result.approximate:
        return
    reachable = ctx.reachable_steps  # the others are NOE501
    for step in ctx.playbook.workflow:
        if step.name in reachable and step.name not in result.ran:
            ctx.report(
                "NOE511",
                f"step `{step.name}` never runs: arcs lead to it, but no execution reaches it "
                "with a live token (a join before it never fires, or the guards on the way "
                "contradict each other)",
                step.name_span,
            )
