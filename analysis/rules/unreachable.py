"""NOE501: steps no path from the entry step reaches (statically dead arcs do not count)."""

from __future__ import annotations

from noetlc.analysis.context import LintContext


def run(ctx: LintContext) -> None:
    reachable = ctx.reachable_steps
    for step in ctx.playbook.workflow:
        if step.name not in reachable:
            ctx.report(
                "NOE501",
                f"step `{step.name}` is unreachable: no arc from the entry step "
                f"`{ctx.net.entry_step}` leads to it",
                step.name_span,
            )
