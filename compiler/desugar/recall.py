"""Pieces shared by the `retry` and `case` rewrites: collecting into ctx, re-invoking a call.

`collect: {from, into, mode}` becomes a ctx write; re-invoking a call with new `params`
(pagination) becomes a `jump` back to the task whose `params` read `iter.params`.
"""

from __future__ import annotations

import json
import re

from noetlc.compiler.desugar.common import guard_body
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Span
from noetlc.stdlib_tools.kinds import argument_names, lookup

_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def collect_write(
    value: YMap, at: Span, base: str = "result", pages: bool = False
) -> tuple[YScalar, YNode] | None:
    """`collect` -> a ctx write; None when `into` does not name a ctx key. `path` is read from
    `base`: the call's result in `case` rules, its body (`response`) in retry policies. With
    `pages` (retry policies), `append` adds a list's items, as NoETL's pagination helper does
    (noetl/noetl `noetl/core/runtime/retry.py`, `_aggregate_results`)."""
    source = value.get("from")
    path = value.get("path")
    into = value.get("into")
    mode = value.get("mode") or value.get("strategy")
    if not (isinstance(into, YScalar) and isinstance(into.value, str)):
        return None
    target = into.value[4:] if into.value.startswith("ctx.") else into.value
    if not _IDENTIFIER.match(target):
        return None
    if isinstance(source, YScalar):
        expr = str(source.value)
        expr = guard_body(expr) if "{{" in expr else expr
    elif isinstance(path, YScalar):
        expr = f"{base}.{path.value}"
    else:
        expr = "result"
    extend = isinstance(mode, YScalar) and mode.value == "extend"
    item = f"({expr})" if extend else f"[{expr}]"
    if pages and not extend and not (isinstance(mode, YScalar) and mode.value == "replace"):
        item = f"(({expr}) if ({expr}) is sequence and ({expr}) is not string and ({expr}) is not mapping else [{expr}])"
    return YScalar(target, at), YScalar(
        "{{ (ctx." + target + " | default([])) + " + item + " }}", at
    )


def retarget_self(rule: YNode, task_name: str) -> YNode:
    """Point `to: __self__` of a re-invocation rule at the task's real name."""
    if isinstance(rule, YMap):
        return YMap(tuple((k, retarget_self(v, task_name)) for k, v in rule.items), rule.span)
    if isinstance(rule, YSeq):
        return YSeq(tuple(retarget_self(v, task_name) for v in rule.items), rule.span)
    if rule.value == "__self__":
        return YScalar(task_name, rule.span)
    return rule


def make_recallable(task: YMap, step: str, keys: set[str]) -> YMap:
    """Name the task and make its `params` read `iter.params` when a re-invocation set them."""
    if "name" not in task:
        task = YMap(
            ((YScalar("name", task.span), YScalar(f"{step}_task", task.span)), *task.items),
            task.span,
        )
    spec = task.get("spec")
    under_spec = "params" not in task and isinstance(spec, YMap) and "params" in spec
    if not (under_spec or "params" in task or _takes_params(task)):
        return task  # e.g. python: its arguments read `iter.params` themselves
    holder = spec if under_spec and isinstance(spec, YMap) else task
    params = holder.get("params")
    original = params if isinstance(params, YMap) else YMap((), task.span)
    out = list(original.items)
    present = {str(k.value) for k, _ in out}
    out = [(k, YScalar(_param_template(str(k.value), v), v.span)) for k, v in out]
    out.extend(
        (YScalar(k, task.span), YScalar(_param_template(k, None), task.span))
        for k in sorted(keys - present)
    )
    holder = holder.with_item("params", YMap(tuple(out), original.span))
    return task.with_item("spec", holder) if under_spec else holder


def _takes_params(task: YMap) -> bool:
    """Whether the task's tool kind has a `params:` argument (http, sql kinds)."""
    kind = task.get("kind")
    if not (isinstance(kind, YScalar) and isinstance(kind.value, str)):
        return True
    record = lookup(kind.value)
    if record is None:
        return True  # unknown kinds are reported by `resolve`
    return "params" in argument_names(record.schema)


def _param_template(key: str, original: YNode | None) -> str:
    if isinstance(original, YScalar) and isinstance(original.value, str) and "{{" in original.value:
        fallback = "(" + guard_body(original.value) + ")"
    elif isinstance(original, YScalar):
        fallback = json.dumps(original.value)
    else:
        fallback = "none"
    return "{{ iter.params." + key + " if iter.params is defined else " + fallback + " }}"
