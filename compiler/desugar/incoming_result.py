"""A bare `result` in a step's tool input -> the result of the step that routed here.

In NoETL a step's tools render with `result` bound to the incoming step's result (the step
whose arc fired): `input: {data: "{{ result }}"}` reads what the previous step returned.
noetlc reads results by the producer's name, so the rewrite names it: with one step routing
to this one, `result` becomes that step's name; with several, each of their arcs passes its
result as `args.result` and `result` reads `args.result`. A step nothing routes to (the
entry) keeps `result` undefined, as in NoETL.

Only the step's tools and input are rewritten: a task's own policy (`outcome`), the step's
`set:` and its arcs read the step's own result, and the legacy forms that bind `result`
(`case`, `vars`) were rewritten before this pass. A workload key named `result` is what a bare
`result` reads (the bare-name fallback), so nothing is rewritten then.
"""

from __future__ import annotations

from noetlc.compiler.desugar.common import key_span, rewrite_node, step_name, steps
from noetlc.compiler.shapes import arc_target, routes
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter

# the parts of a step whose templates render before the step's tools run
_INPUT_KEYS = ("tool", "input", "args", "loop")
_PROBE = {"result": "\x00incoming\x00"}


def run(doc: YMap, reporter: Reporter) -> YMap:
    workload = doc.get("workload")
    if isinstance(workload, YMap) and workload.get("result") is not None:
        return doc
    readers = {step_name(step): i for i, step in steps(doc) if _reads_result(step)}
    if not readers:
        return doc
    sources: dict[str, list[int]] = {name: [] for name in readers}
    for i, step in steps(doc):
        for entry in routes(step.get("next")).entries:
            found = arc_target(entry)
            if found is not None and found[0] in sources and i not in sources[found[0]]:
                sources[found[0]].append(i)
    workflow = doc.get("workflow")
    assert isinstance(workflow, YSeq)
    items = list(workflow.items)
    for name, index in readers.items():
        incoming = sources[name]
        if not incoming:
            continue  # nothing routes here: `result` stays undefined, as in NoETL
        if len(incoming) == 1:
            replacement = step_name(_as_map(items[incoming[0]]))
        else:
            replacement = "args.result"
            for source in incoming:
                items[source] = _pass_result(_as_map(items[source]), name)
        step = _as_map(items[index])
        items[index] = _rename(step, replacement)
        reporter.report(
            "NOE419",
            f"step `{name}` reads the incoming step's result as `result`: rewritten to "
            f"`{replacement}`",
            key_span(step, "tool"),
        )
    return doc.with_item("workflow", YSeq(tuple(items), workflow.span))


def _as_map(node: YNode) -> YMap:
    assert isinstance(node, YMap)
    return node


def _reads_result(step: YMap) -> bool:
    return _rename(step, _PROBE["result"]) != step


def _rename(step: YMap, replacement: str) -> YMap:
    names = {"result": replacement}
    out = step
    for key in _INPUT_KEYS:
        value = step.get(key)
        if value is None:
            continue
        if key == "tool":
            new = _rename_tasks(value, names)
        else:
            new = rewrite_node(value, names, {})
        if new != value:
            out = out.with_item(key, new)
    return out


def _rename_tasks(tool: YNode, names: dict[str, str]) -> YNode:
    """Every task's arguments; a task's `spec` (its policy reads `outcome`) is kept."""
    if isinstance(tool, YSeq):
        return YSeq(tuple(_rename_tasks(item, names) for item in tool.items), tool.span)
    if not isinstance(tool, YMap):
        return tool
    items = []
    for key, value in tool.items:
        label = key.value if isinstance(key, YScalar) else None
        if label == "spec":
            items.append((key, value))
        elif isinstance(value, YMap) and value.get("kind") is not None:  # `- name: {kind: ...}`
            items.append((key, _rename_tasks(value, names)))
        else:
            items.append((key, rewrite_node(value, names, {})))
    return YMap(tuple(items), tool.span)


def _pass_result(source: YMap, target: str) -> YMap:
    """The arcs of `source` to `target` carry `args.result: "{{ source }}"`."""
    found = routes(source.get("next"))
    value = "{{ " + step_name(source) + " }}"
    entries: list[YNode] = []
    for entry in found.entries:
        hit = arc_target(entry)
        if hit is None or hit[0] != target:
            entries.append(entry)
            continue
        arc = (
            entry
            if isinstance(entry, YMap)
            else YMap(((YScalar("step", entry.span), entry),), entry.span)
        )
        args = arc.get("args")
        args = args if isinstance(args, YMap) else YMap((), arc.span)
        if args.get("result") is None:
            args = args.with_item("result", YScalar(value, arc.span))
        entries.append(arc.with_item("args", args))
    seq = YSeq(tuple(entries), found.node.span if found.node is not None else source.span)
    if found.form == "router":
        assert isinstance(found.node, YMap)
        return source.with_item("next", found.node.with_item("arcs", seq))
    return source.with_item("next", seq)
