"""Step-level `sink:` -> an extra storage task at the end of the step's pipeline."""

from __future__ import annotations

from noetlc.compiler.desugar import retry
from noetlc.compiler.desugar.common import map_step_list, step_name
from noetlc.compiler.shapes import task_maps, with_task_maps
from noetlc.compiler.ynodes import YMap, YScalar
from noetlc.diagnostics.report import Reporter


def run(doc: YMap, reporter: Reporter) -> YMap:
    def fix(step: YMap) -> YMap | None:
        sink = step.get("sink")
        key = step.key_node("sink")
        if sink is None or key is None:
            return None
        name = step_name(step)
        if not isinstance(sink, YMap) or "kind" not in sink:
            reporter.report(
                "NOE410",
                f"the `sink:` of step `{name}` has no tool `kind:`",
                key.span,
                hint="write the storage call as a task of the pipeline",
            )
            return step.without("sink")
        reporter.report("NOE407", f"`sink:` of step `{name}` is a storage task now", key.span)
        task = (
            sink
            if "name" in sink
            else YMap(
                ((YScalar("name", key.span), YScalar(f"{name}_sink", key.span)), *sink.items),
                sink.span,
            )
        )
        # the storage call may carry its own `retry:`
        return retry.finish(
            with_task_maps(step.without("sink"), [*task_maps(step), task]), reporter
        )

    return map_step_list(doc, fix)
