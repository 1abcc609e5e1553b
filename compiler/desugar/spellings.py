"""Other spellings of canonical settings, rewritten without a warning.

* Durations: `timeout`, `delay`, `max_delay`, `interval`, `deadline` written as a duration
  string (`"300s"`, `"5m"`, `"1h"`, `"250ms"`, `"1m30s"`) in a `spec:` mapping (step, task,
  loop, router), a `retry:` block or a policy rule's `then` are seconds (a number).
* `spec.eval_mode` of a step is the step's `eval_mode`.
* A step's `args:` (the older step model) are its tools' input, like a step-level `input:`
  (merged, `input:` wins on a shared key).
* `tool.spec.retry` is the task's `retry:` (rewritten into policy rules by the `retry` pass).
* `loop.spec.batch_size` is `max_in_flight` (at most that many iterations at a time) unless
  `max_in_flight` is written; `loop.spec.on_error: continue` is
  `loop.spec.policy.failure.mode: best_effort` (a failed iteration does not fail the loop),
  `on_error: fail` the default `fail_fast`.
* `set: {ctx: {x: 1}}` is `set: {ctx.x: 1}` (the normalize pass reads both).
"""

from __future__ import annotations

import re

from noetlc.compiler.desugar.common import map_step_list
from noetlc.compiler.shapes import task_maps, with_task_maps
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter

DURATION_KEYS = frozenset({"timeout", "delay", "max_delay", "interval", "deadline"})
_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*)+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def seconds(text: str) -> float | None:
    """A duration string in seconds (`"1m30s"` -> 90.0); None when it is not one."""
    if not _DURATION.match(text):
        return None
    return sum(float(n) * _UNIT[u] for n, u in _PART.findall(text))


def run(doc: YMap, reporter: Reporter) -> YMap:
    def fix(step: YMap) -> YMap | None:
        new = _durations(step, "", reporter)
        assert isinstance(new, YMap)
        spec = new.get("spec")
        if isinstance(spec, YMap) and "eval_mode" in spec and "eval_mode" not in new:
            mode = spec.get("eval_mode")
            assert mode is not None
            rest = spec.without("eval_mode")
            new = new.with_item("eval_mode", mode)
            new = new.with_item("spec", rest) if rest.items else new.without("spec")
        args = new.get("args")
        if isinstance(args, YMap):
            own = new.get("input")
            merged = args.items + (own.items if isinstance(own, YMap) else ())
            keys: dict[object, int] = {}
            items: list[tuple[YScalar, YNode]] = []
            for k, v in merged:  # a later key (from `input:`) replaces an earlier one
                if k.value in keys:
                    items[keys[k.value]] = (k, v)
                else:
                    keys[k.value] = len(items)
                    items.append((k, v))
            new = new.without("args").with_item("input", YMap(tuple(items), args.span))
        tasks = task_maps(new)
        if any(_spec_retry(t) is not None for t in tasks):
            new = with_task_maps(new, [_retry_up(t) for t in tasks])
        loop = new.get("loop")
        if isinstance(loop, YMap) and isinstance(loop.get("spec"), YMap):
            new = new.with_item("loop", _loop_spec(loop))
        return new if new != step or new.items != step.items else None

    return map_step_list(doc, fix)


def _durations(node: YNode, key: str, reporter: Reporter) -> YNode:
    """Duration strings -> seconds under the keys that take a duration, in settings only."""
    if isinstance(node, YScalar):
        if key in DURATION_KEYS and isinstance(node.value, str) and "{{" not in node.value:
            value = seconds(node.value)
            if value is not None:
                return YScalar(int(value) if value.is_integer() else value, node.span)
            reporter.report(
                "NOE104",
                f"invalid duration {node.value!r} for `{key}`",
                node.span,
                hint='write seconds (`300`) or a duration: `"300s"`, `"5m"`, `"1h"`, `"250ms"`',
            )
        return node
    if isinstance(node, YSeq):
        return YSeq(tuple(_durations(i, key, reporter) for i in node.items), node.span)
    items = []
    for k, v in node.items:
        name = str(k.value)
        if name in _DATA:
            items.append((k, v))
        elif (
            name in _SETTINGS
            or key in _SETTINGS
            or (isinstance(v, YMap | YSeq) and name in _STRUCTURE)
        ):
            items.append((k, _durations(v, name, reporter)))
        else:
            items.append((k, v))
    return YMap(tuple(items), node.span)


# Where durations are settings: inside these mappings (never inside tool arguments or data).
_SETTINGS = frozenset({"spec", "retry", "then", "else", "policy", "rules", "backoff"})
_STRUCTURE = frozenset({"tool", "loop", "next", "arcs", "case"})
_DATA = frozenset(
    {"set", "set_ctx", "set_iter", "set_vars", "input", "args", "params", "data", "payload", "body"}
)


def _spec_retry(task: YMap) -> YNode | None:
    spec = task.get("spec")
    return spec.get("retry") if isinstance(spec, YMap) else None


def _retry_up(task: YMap) -> YMap:
    retry = _spec_retry(task)
    if retry is None or "retry" in task:
        return task
    spec = task.get("spec")
    assert isinstance(spec, YMap)
    rest = spec.without("retry")
    task = task.with_item("retry", retry)
    return task.with_item("spec", rest) if rest.items else task.without("spec")


def _loop_spec(loop: YMap) -> YMap:
    spec = loop.get("spec")
    assert isinstance(spec, YMap)
    new = spec
    batch = spec.get("batch_size")
    if batch is not None:
        new = new.without("batch_size")
        if "max_in_flight" not in spec:
            new = new.with_item("max_in_flight", batch)
    on_error = spec.get("on_error")
    if isinstance(on_error, YScalar) and on_error.value in ("continue", "fail"):
        new = new.without("on_error")
        mode = "best_effort" if on_error.value == "continue" else "fail_fast"
        policy = new.get("policy")
        policy = policy if isinstance(policy, YMap) else YMap((), on_error.span)
        failure = policy.get("failure")
        failure = failure if isinstance(failure, YMap) else YMap((), on_error.span)
        if "mode" not in failure:
            failure = failure.with_item("mode", YScalar(mode, on_error.span))
        new = new.with_item("policy", policy.with_item("failure", failure))
    return loop.with_item("spec", new) if new is not spec else loop
