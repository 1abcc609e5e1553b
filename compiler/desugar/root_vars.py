"""Root-level `vars:` (an older NoETL form) -> ctx set once when the execution starts.

The block held execution-wide mutable values with their initial values. Canonical playbooks
keep mutable state in ctx: the initial values become one `set_ctx` of a noop task named
`<step>__vars` that runs first in the entry step (`start`, or `executor.spec.entry_step`, or the
first step), guarded so that an execution that comes back to the entry step does not reset
them, and every `{{ vars.x }}` reads `{{ ctx.x }}`.

Only `noetlc migrate` rewrites it: `check` rejects root `vars:` (NOE105) and points at
`migrate`.
"""

from __future__ import annotations

from noetlc.compiler.desugar.common import node, replace_steps, rewrite_node, step_name, steps
from noetlc.compiler.shapes import task_maps, with_task_maps
from noetlc.compiler.ynodes import YMap, YScalar
from noetlc.diagnostics.report import Reporter


def run(doc: YMap, reporter: Reporter) -> YMap:
    values = doc.get("vars")
    key = doc.key_node("vars")
    if key is None:
        return doc
    doc = doc.without("vars")
    reporter.report("NOE414", "root-level `vars:` become ctx values set at the start", key.span)
    found = list(steps(doc))
    if isinstance(values, YMap) and values.items and found:
        index, entry = _entry(doc, found)
        first = str(values.items[0][0].value)
        init = node(
            {
                "name": f"{step_name(entry)}__vars",
                "kind": "noop",
                "spec": {
                    "policy": {
                        "rules": [
                            {
                                "when": "{{ ctx." + first + " is not defined }}",
                                "then": {"do": "continue", "set_ctx": values},
                            }
                        ]
                    }
                },
            },
            key.span,
        )
        assert isinstance(init, YMap)
        new_entry = with_task_maps(entry, [init, *task_maps(entry)])
        doc = replace_steps(doc, {index: new_entry})
    out = doc
    for section in ("workflow", "workbook"):
        part = out.get(section)
        if part is not None:
            out = out.with_item(section, rewrite_node(part, {"vars": "ctx"}, {}))
    return out


def _entry(doc: YMap, found: list[tuple[int, YMap]]) -> tuple[int, YMap]:
    for i, step in found:
        if step_name(step) == "start":
            return i, step
    executor = doc.get("executor")
    spec = executor.get("spec") if isinstance(executor, YMap) else None
    declared = spec.get("entry_step") if isinstance(spec, YMap) else None
    if isinstance(declared, YScalar):
        for i, step in found:
            if step_name(step) == declared.value:
                return i, step
    return found[0]
