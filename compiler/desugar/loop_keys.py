"""Legacy loop keys (older NoETL engines): `mode` -> `spec.mode`, `element` -> `iterator`,
`collection` -> `in`, `concurrency` -> `spec.max_in_flight`."""

from __future__ import annotations

from noetlc.compiler.desugar.common import map_step_list, step_name
from noetlc.compiler.ynodes import YMap, YScalar
from noetlc.diagnostics.report import Reporter


def run(doc: YMap, reporter: Reporter) -> YMap:
    def fix(step: YMap) -> YMap | None:
        loop = step.get("loop")
        if not isinstance(loop, YMap) or not any(
            k in loop for k in ("mode", "element", "collection", "concurrency")
        ):
            return None
        new = loop
        for old, canonical in (("element", "iterator"), ("collection", "in")):
            value, key = loop.get(old), loop.key_node(old)
            if value is not None and key is not None:
                reporter.report(
                    "NOE404",
                    f"loop `{old}:` is now `{canonical}:` (step `{step_name(step)}`)",
                    key.span,
                )
                new = new.without(old)
                if canonical not in new:
                    new = new.with_item(canonical, value, key.span)
        limit, key = loop.get("concurrency"), loop.key_node("concurrency")
        if limit is not None and key is not None:
            reporter.report(
                "NOE404",
                f"loop `concurrency:` is now `loop.spec.max_in_flight` (step `{step_name(step)}`)",
                key.span,
            )
            spec = new.get("spec")
            spec = spec if isinstance(spec, YMap) else YMap((), key.span)
            if "max_in_flight" not in spec:
                spec = spec.with_item("max_in_flight", limit, key.span)
            new = new.without("concurrency").with_item("spec", spec)
        mode, key = new.get("mode"), new.key_node("mode")
        if mode is not None and key is not None:
            reporter.report(
                "NOE404",
                f"loop `mode:` is now `loop.spec.mode` (step `{step_name(step)}`)",
                key.span,
            )
            spec = new.get("spec")
            spec = spec if isinstance(spec, YMap) else YMap((), key.span)
            if "mode" not in spec:
                mode_value = (
                    "parallel"
                    if isinstance(mode, YScalar) and mode.value in ("parallel", "async")
                    else "sequential"
                )
                spec = spec.with_item("mode", YScalar(mode_value, mode.span), key.span)
            new = new.without("mode").with_item("spec", spec)
        return step.with_item("loop", new)

    return map_step_list(doc, fix)
