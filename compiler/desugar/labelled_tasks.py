"""Named-key tasks `- fetch: {kind: http, ...}` (an older NoETL form) -> `- name: fetch` + fields."""

from __future__ import annotations

from noetlc.compiler.desugar.common import map_step_list, step_name
from noetlc.compiler.shapes import task_entry
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter


def run(doc: YMap, reporter: Reporter) -> YMap:
    def fix(step: YMap) -> YMap | None:
        tool = step.get("tool")
        if not isinstance(tool, YSeq):
            return None
        changed = False
        items: list[YNode] = []
        for task in tool.items:
            entry = task_entry(task)
            if entry.form == "named" and entry.key is not None and entry.body is not None:
                key = entry.key
                reporter.report(
                    "NOE401",
                    f"named-key task `{key.value}:` in step `{step_name(step)}`",
                    key.span,
                )
                items.append(
                    YMap(
                        (
                            (YScalar("name", key.span), YScalar(key.value, key.span)),
                            *entry.body.items,
                        ),
                        task.span,
                    )
                )
                changed = True
                continue
            items.append(task)
        return step.with_item("tool", YSeq(tuple(items), tool.span)) if changed else None

    return map_step_list(doc, fix)
