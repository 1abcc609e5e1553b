"""Step `vars:` and step `set_ctx:` (older NoETL forms) -> `set_ctx` on the last task's success,
and `vars.x` -> `ctx.x`.

The values are evaluated after the step's pipeline succeeded, where `result` (the legacy name
of the step's result) and the step's own name (`{{ check.items }}` in the `vars:` of step
`check`: its result is not bound yet while its last task's rule runs) are the last task's
outcome result.
"""

from __future__ import annotations

from noetlc.compiler.desugar.common import (
    add_policy_rules,
    map_step_list,
    node,
    rewrite_node,
    step_name,
    steps,
)
from noetlc.compiler.shapes import task_maps, with_task_maps
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter

RESULT_NAMES = {"result": "outcome.result", "response": "outcome.result"}
# `vars:`, and a step-level `set_ctx:` (the same writes, NoETL's later spelling of them, which
# its current parser refuses: "use input/set", noetl/core/dsl/engine/models/workflow.py)
KEYS = ("vars", "set_ctx")


def run(doc: YMap, reporter: Reporter) -> YMap:
    written = {key for _, step in _steps(doc) for key in KEYS if key in step}
    if not written:
        # `vars.x` written by a legacy `case` rule's `set`/`vars` is ctx too
        workflow = doc.get("workflow")
        if isinstance(workflow, YSeq) and _mentions_vars(workflow):
            return doc.with_item("workflow", rewrite_node(workflow, {"vars": "ctx"}, {}))
        return doc

    def fix(step: YMap) -> YMap | None:
        changed = None
        for spelling in KEYS:
            values = step.get(spelling)
            key = step.key_node(spelling)
            if not isinstance(values, YMap) or key is None:
                continue
            reporter.report(
                "NOE406", f"`{spelling}:` of step `{step_name(step)}` become ctx writes", key.span
            )
            tasks = task_maps(step)
            step = step.without(spelling)
            changed = step
            if not tasks:
                continue
            names = {**RESULT_NAMES, step_name(step): "outcome.result"}
            writes = rewrite_node(values, names, {})
            rule = node(
                {
                    "when": "{{ outcome.status == 'ok' }}",
                    "then": {"do": "continue", "set_ctx": writes},
                },
                key.span,
            )
            tasks[-1] = add_policy_rules(tasks[-1], [rule])
            step = changed = with_task_maps(step, tasks)
        return changed

    doc = map_step_list(doc, fix)
    if "vars" not in written:
        return doc
    # `{{ vars.x }}` anywhere reads the ctx key the block wrote.
    workflow = doc.get("workflow")
    assert isinstance(workflow, YSeq)
    return doc.with_item("workflow", rewrite_node(workflow, {"vars": "ctx"}, {}))


def _steps(doc: YMap) -> list[tuple[int, YMap]]:
    return list(steps(doc))


def _mentions_vars(node: YNode) -> bool:
    """Does a template below `node` name `vars.` (a cheap text test before rewriting)?"""
    if isinstance(node, YScalar):
        return isinstance(node.value, str) and "vars." in node.value and "{{" in node.value
    if isinstance(node, YSeq):
        return any(_mentions_vars(i) for i in node.items)
    if isinstance(node, YMap):
        return any(_mentions_vars(v) for _, v in node.items)
    return False
