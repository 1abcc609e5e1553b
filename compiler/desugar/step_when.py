"""`step.when` -> `spec.policy.admit.rules` (allow when the condition holds, else deny)."""

from __future__ import annotations

from noetlc.compiler.desugar.common import map_step_list, node, step_name
from noetlc.compiler.ynodes import YMap
from noetlc.diagnostics.report import Reporter


def run(doc: YMap, reporter: Reporter) -> YMap:
    def fix(step: YMap) -> YMap | None:
        when = step.get("when")
        key = step.key_node("when")
        if when is None or key is None:
            return None
        reporter.report("NOE403", f"step `{step_name(step)}` uses `when:` for admission", key.span)
        rules = node(
            [{"when": when, "then": {"allow": True}}, {"else": {"then": {"allow": False}}}],
            when.span,
        )
        spec = step.get("spec")
        spec = spec if isinstance(spec, YMap) else YMap((), key.span)
        policy = spec.get("policy")
        policy = policy if isinstance(policy, YMap) else YMap((), key.span)
        admit = YMap((), key.span).with_item("rules", rules)
        spec = spec.with_item("policy", policy.with_item("admit", admit))
        return step.without("when").with_item("spec", spec)

    return map_step_list(doc, fix)
