"""v2 routing-only steps (no `tool:`, only `case`/`next`) -> `tool: {kind: noop}`."""

from __future__ import annotations

from noetlc.compiler.desugar.common import map_step_list, node, step_name
from noetlc.compiler.diagnostics import Reporter
from noetlc.compiler.ynodes import YMap


def run(doc: YMap, reporter: Reporter) -> YMap:
    def fix(step: YMap) -> YMap | None:
        if "tool" in step or "case" not in step:
            return None
        reporter.report(
            "NOE409", f"step `{step_name(step)}` has no tool; it only routes", step.span
        )
        return step.with_item("tool", node({"kind": "noop"}, step.span))

    return map_step_list(doc, fix)
