"""v2 routing-only steps (no `tool:`) -> `tool: {kind: noop}`.

`check` does it only in documents written in the v2 `case` dialect (some step has `case:`),
where a step without a tool was a routing or end marker; elsewhere a missing tool stays an
error (NOE206) whose hint is to run `noetlc migrate`, which rewrites every such step.
"""

from __future__ import annotations

from noetlc.compiler.desugar.common import map_step_list, node, step_name, steps
from noetlc.compiler.surface.shape_table import STEP_KEYS
from noetlc.compiler.ynodes import YMap, YScalar
from noetlc.diagnostics.report import Reporter


def run(doc: YMap, reporter: Reporter) -> YMap:
    if not any("case" in step for _, step in steps(doc)):
        return doc
    return run_all(doc, reporter)


def run_all(doc: YMap, reporter: Reporter) -> YMap:
    """Every step without a tool gets a noop (what `noetlc migrate` does in any document)."""

    def fix(step: YMap) -> YMap | None:
        if "tool" in step:
            return None
        reporter.report(
            "NOE409", f"step `{step_name(step)}` has no tool; it only routes", step.span
        )
        return step.with_item("tool", node({"kind": "noop"}, step.span))

    return map_step_list(doc, fix)


# the step's own keys; `command:` beside `tool: KIND` is the tool's SQL or command line
_STEP_ONLY = STEP_KEYS - {"command"}


def tool_kind(doc: YMap, reporter: Reporter) -> YMap:
    """`noetlc migrate`: `tool: postgres` with the tool's arguments written on the step (an
    older form) -> `tool: {kind: postgres, <those arguments>}`."""

    def fix(step: YMap) -> YMap | None:
        tool = step.get("tool")
        key = step.key_node("tool")
        if not (isinstance(tool, YScalar) and isinstance(tool.value, str) and key is not None):
            return None
        reporter.report(
            "NOE418",
            f"`tool: {tool.value}` of step `{step_name(step)}` is a task mapping now",
            key.span,
        )
        arguments = tuple((k, v) for k, v in step.items if str(k.value) not in _STEP_ONLY)
        task = YMap(((YScalar("kind", key.span), tool), *arguments), step.span)
        kept = YMap(tuple((k, v) for k, v in step.items if str(k.value) in _STEP_ONLY), step.span)
        return kept.with_item("tool", task)

    return map_step_list(doc, fix)
