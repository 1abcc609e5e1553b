"""Legacy event names in arc guards -> the boundary events the control VM routes on.

In the legacy forms `call.done` is the step's call finishing well, `call.error` its failure,
`step.exit` the step ending. On an arc (which is decided when the step ends) they mean
`step.done` (`loop.done` for a loop step), `step.failed`, and `step.done`/`loop.done`. Without
the rewrite such an arc tests an event the step never emits and can never fire.
"""

from __future__ import annotations

from noetlc.compiler.desugar.common import map_step_list, rewrite_node, step_name
from noetlc.compiler.shapes import done_event
from noetlc.compiler.ynodes import YMap
from noetlc.diagnostics.report import Reporter
from noetlc.ir.events import STEP_DONE, STEP_FAILED, legacy_aliases

LEGACY = tuple(legacy_aliases(STEP_DONE))  # the names an arc may test


def run(doc: YMap, reporter: Reporter) -> YMap:
    def fix(step: YMap) -> YMap | None:
        routes = step.get("next")
        if routes is None:
            return None
        done = done_event(step)
        new = rewrite_node(routes, {}, legacy_aliases(done))
        if new == routes:
            return None
        key = step.key_node("next")
        reporter.report(
            "NOE412",
            f"step `{step_name(step)}` routes on legacy event names"
            f" ({', '.join(LEGACY)}): rewritten to {done} / {STEP_FAILED}",
            key.span if key is not None else step.span,
        )
        return step.with_item("next", new)

    return map_step_list(doc, fix)
