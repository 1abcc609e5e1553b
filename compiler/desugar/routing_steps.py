"""v2 routing-only steps (no `tool:`) -> `tool: {kind: noop}`.

`check` does it only in documents written in the v2 `case` dialect (some step has `case:`),
where a step without a tool was a routing or end marker; elsewhere a missing tool stays an
error (NOE206) whose hint is to run `noetlc migrate`, which rewrites every such step.
"""

from __future__ import annotations

from noetlc.compiler.desugar.common import map_step_list, node, step_name, steps
from noetlc.compiler.shapes import ROUTING_MARKERS, WORKBOOK_ENTRY_KEYS
from noetlc.compiler.surface.shape_table import STEP_KEYS
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
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


def type_kind(doc: YMap, reporter: Reporter) -> YMap:
    """`noetlc migrate`: a step's `type: KIND` (NoETL's oldest form; its parser now says "Use
    'tool.kind' instead", noetl/core/dsl/engine/parser/validation.py) -> `tool: KIND`, which
    `tool_kind` then turns into a task mapping; `type: iterator` with `collection`, `element`,
    `mode` and a `task:` -> a `loop:` over the task (whose own `type` is its `kind`); `type:
    end`/`router` -> no tool (a routing step: `tool: {kind: noop}`)."""

    def fix(step: YMap) -> YMap | None:
        spelling = "type"
        kind = step.get("type")
        tool = step.get("tool")
        if kind is None and isinstance(tool, YScalar) and tool.value == "iterator":
            spelling, kind = "tool", tool  # `tool: iterator`, the same loop form
        elif "tool" in step:
            return None  # `type:` beside a tool: the schema reports it
        key = step.key_node(spelling)
        if not (isinstance(kind, YScalar) and isinstance(kind.value, str) and key is not None):
            return None
        reporter.report(
            "NOE418",
            f"`{spelling}: {kind.value}` of step `{step_name(step)}` is "
            + ("a loop now" if kind.value == "iterator" else "a tool kind (`tool.kind`) now"),
            key.span,
        )
        rest = step.without(spelling)
        if kind.value in ROUTING_MARKERS:
            return rest
        if kind.value != "iterator":
            return rest.with_item("tool", kind, key.span)
        loop_keys = ("collection", "element", "mode", "concurrency", "in", "iterator")
        loop = YMap(tuple((k, v) for k, v in step.items if str(k.value) in loop_keys), key.span)
        kept = YMap(
            tuple((k, v) for k, v in rest.items if str(k.value) not in (*loop_keys, "task")),
            step.span,
        )
        kept = kept.with_item("loop", loop, key.span)
        task = step.get("task")
        if isinstance(task, YMap):
            for inner_spelling in ("type", "tool"):
                inner = task.get(inner_spelling)
                inner_key = task.key_node(inner_spelling)
                if "kind" not in task and isinstance(inner, YScalar) and inner_key is not None:
                    task = task.without(inner_spelling).with_item("kind", inner, inner_key.span)
            kept = kept.with_item("tool", task, task.span)
        return kept

    return map_step_list(doc, fix)


def _type_as_tool(entry: YMap) -> YNode:
    kind, key = entry.get("type"), entry.key_node("type")
    if not (isinstance(kind, YScalar) and isinstance(kind.value, str) and key is not None):
        return entry
    return entry.without("type").with_item("tool", kind, key.span)


def tool_kind(doc: YMap, reporter: Reporter) -> YMap:
    """`noetlc migrate`: `tool: postgres` with the tool's arguments written on the step (an
    older form) -> `tool: {kind: postgres, <those arguments>}`."""

    def fix(step: YMap) -> YMap | None:
        tool = step.get("tool")
        key = step.key_node("tool")
        if not (isinstance(tool, YScalar) and isinstance(tool.value, str) and key is not None):
            return None
        if tool.value in ROUTING_MARKERS:
            reporter.report(
                "NOE418",
                f"`tool: {tool.value}` of step `{step_name(step)}` marks a step that runs no "
                "tool: `tool: {kind: noop}`",
                key.span,
            )
            return step.without("tool")  # `routing_only` gives it its noop
        reporter.report(
            "NOE418",
            f"`tool: {tool.value}` of step `{step_name(step)}` is a task mapping now",
            key.span,
        )
        arguments = tuple((k, v) for k, v in step.items if str(k.value) not in _STEP_ONLY)
        task = YMap(((YScalar("kind", key.span), tool), *arguments), step.span)
        kept = YMap(tuple((k, v) for k, v in step.items if str(k.value) in _STEP_ONLY), step.span)
        return kept.with_item("tool", task)

    return _workbook_tool_kind(map_step_list(doc, fix), reporter)


def _workbook_tool_kind(doc: YMap, reporter: Reporter) -> YMap:
    """The same older form on a workbook entry: `{name, tool: postgres, auth, query}` ->
    `{name, tool: {kind: postgres, auth, query}}` (NoETL's workbook executor still reads a
    string `tool`, noetl/core/workflow/workbook/executor.py `build_action_config`)."""
    entries = doc.get("workbook")
    if not isinstance(entries, YSeq):
        return doc
    out: list[YNode] = []
    changed = False
    for entry in entries.items:
        if isinstance(entry, YMap) and "tool" not in entry and "kind" not in entry:
            entry = _type_as_tool(entry)  # `type: KIND`, the oldest spelling
        tool = entry.get("tool") if isinstance(entry, YMap) else None
        key = entry.key_node("tool") if isinstance(entry, YMap) else None
        if not (
            isinstance(entry, YMap)
            and "kind" not in entry
            and isinstance(tool, YScalar)
            and isinstance(tool.value, str)
            and key is not None
        ):
            out.append(entry)
            continue
        name = entry.get("name")
        reporter.report(
            "NOE418",
            f"`tool: {tool.value}` of workbook entry "
            f"`{name.value if isinstance(name, YScalar) else '?'}` is a task mapping now",
            key.span,
        )
        own = tuple((k, v) for k, v in entry.items if str(k.value) in WORKBOOK_ENTRY_KEYS)
        arguments = tuple((k, v) for k, v in entry.items if str(k.value) not in WORKBOOK_ENTRY_KEYS)
        task = YMap(((YScalar("kind", key.span), tool), *arguments), entry.span)
        out.append(YMap(own, entry.span).with_item("tool", task))
        changed = True
    return doc.with_item("workbook", YSeq(tuple(out), entries.span)) if changed else doc
