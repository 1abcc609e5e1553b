"""Settings the NoETL specs define that noetlc does not implement: refused, never dropped.

Each is reported as NOE106 (an error at the key, with a hint) instead of being accepted and
ignored:

* `tool.spec.async: true` (a task that does not wait for its tool): every task's outcome
  steers its pipeline here; run the work in a step of its own instead.
* a step's `spec.on_error` other than `fail` (the default): `ignore` and `retry` are written
  canonically as task policy rules (`do: continue` / `do: retry`) or a `step.failed` arc.

The `case` rule keys without a meaning are refused by the `case` rewrite (`case/next_action.py`).
"""

from __future__ import annotations

from noetlc.compiler.desugar.common import steps
from noetlc.compiler.shapes import task_maps
from noetlc.compiler.ynodes import YMap, YScalar
from noetlc.diagnostics.report import Reporter


def run(doc: YMap, reporter: Reporter) -> YMap:
    for _, step in steps(doc):
        spec = step.get("spec")
        on_error = spec.get("on_error") if isinstance(spec, YMap) else None
        if (
            isinstance(spec, YMap)
            and on_error is not None
            and not (isinstance(on_error, YScalar) and on_error.value == "fail")
        ):
            key = spec.key_node("on_error")
            assert key is not None
            reporter.report(
                "NOE106",
                "`spec.on_error` other than `fail` is not supported",
                key.span,
                hint="write a task policy rule: `when: \"{{ outcome.status == 'error' }}\"` "
                "with `then: {do: continue}` (ignore) or `{do: retry, attempts: 3}`, or "
                "route the failure with an arc `when: \"{{ event.name == 'step.failed' }}\"`",
            )
        for task in task_maps(step):
            task_spec = task.get("spec")
            flag = task_spec.get("async") if isinstance(task_spec, YMap) else None
            if (
                isinstance(task_spec, YMap)
                and flag is not None
                and not (isinstance(flag, YScalar) and flag.value is False)
            ):
                key = task_spec.key_node("async")
                assert key is not None
                reporter.report(
                    "NOE106",
                    "`spec.async` (a task that does not wait for its tool) is not supported",
                    key.span,
                    hint="a task's outcome steers its pipeline; run the work in a step of "
                    "its own (an inclusive `next` starts it besides the rest)",
                )
    return doc


def drop_tracing(doc: YMap, reporter: Reporter) -> YMap:
    """`noetlc migrate`: the root `tracing:` block (trace export settings) is removed."""
    key = doc.key_node("tracing")
    if key is None:
        return doc
    reporter.report(
        "NOE417",
        "root-level `tracing:` removed: executions are traced by their events in the store",
        key.span,
    )
    return doc.without("tracing")
