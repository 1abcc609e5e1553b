"""The `next` action of a legacy `case` rule, standalone `else` rules, rule keys without a
canonical meaning.

`next` in a rule's `then` is written as a list of targets (`- next: [{step: a}, {step: b}]`),
one target (`- next: {step: a}`) or the router form `- next: {to: [...], policy: end_step}`.
Several targets are a parallel fork: all of them start (the first is the rule's routing, the
others start besides it, like `call: {step}`). In the router form, `policy: end_step` is what
the rule's routing does anyway (the first `next` reached ends the step's routing); any other
per-`next` `policy`, a `priority` and a `spec` (a delayed transition) have no canonical
meaning and are refused (NOE106) rather than dropped.

A rule written as `- else: [actions]` (no `when`) runs when none of the rules before it
matched: its condition is the negation of all of theirs.

In a loop step, a `call.done` rule that routes ends the loop early: the rule sets a ctx flag
(`<step>__exit_<k>`) after the iteration's call, the loop's `spec.stop_when` sees it and ends
the loop (the iterations in flight are cancelled), and the rule's arcs fire on that flag.

`step.enter` writes (`set` in a rule on `step.enter`) are made when the step is admitted:
once per step run, before its tool and before a loop's first iteration (`enter_writes`).

A rule's own `retry:` (a retry of the whole `then` chain, `scope: chain`) and its `spec:`
(`cache`) are refused (NOE106) with a hint.
"""

from __future__ import annotations

from noetlc.compiler.desugar.common import condition_expression
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter, Span


def targets(value: YNode, reporter: Reporter) -> tuple[list[YMap], list[YMap]]:
    """A `next` action -> (the routing entries, the entries that start besides them)."""
    if isinstance(value, YMap) and "to" in value:
        _refuse_router_keys(value, reporter)
        value = value.get("to") or YSeq((), value.span)
    entries: list[YMap] = []
    for entry in value.items if isinstance(value, YSeq) else (value,):
        if isinstance(entry, YScalar):
            entry = YMap(((YScalar("step", entry.span), entry),), entry.span)
        if isinstance(entry, YMap):
            entries.append(entry)
    if len(entries) > 1 and not any("when" in e for e in entries):
        return entries[:1], entries[1:]  # a parallel fork: every target starts
    return entries, []


def _refuse_router_keys(value: YMap, reporter: Reporter) -> None:
    for key, node in value.items:
        name = str(key.value)
        if name in ("to",):
            continue
        if name == "policy" and isinstance(node, YScalar) and node.value == "end_step":
            continue
        hint = {
            "policy": "set the step's `next_policy` instead; a `next` cannot override it",
            "priority": "order the rules instead: the first `next` reached wins "
            "(`branch_order: priority` orders whole rules)",
            "spec": "a delayed transition is not supported: put the wait in the target "
            "step (a listener step with `eval_mode: on_event` and `spec.timeout`)",
        }.get(name, "a `next` action takes `to:` (and `policy: end_step`)")
        reporter.report(
            "NOE106", f"`next.{name}` in a `case` rule is not supported", key.span, hint=hint
        )


def else_condition(earlier: list[str]) -> str | None:
    """The condition of a standalone `else` rule: none of the earlier conditions held."""
    if not earlier:
        return None
    return "{{ " + " and ".join(f"not ({condition_expression(t)})" for t in earlier) + " }}"


def enter_admission(
    step: YMap, skips: list[tuple[str | None, Span]], writes: YMap | None, span: Span
) -> YMap:
    """`step.enter` rules -> the step's admission: each `skip` becomes a rule that does not
    admit (the step is recorded as skipped) placed before the existing rules; `set` writes
    are made by every admitting rule."""
    if skips:
        rules: list[YNode] = []
        for condition, at in skips:
            deny = YMap(((YScalar("allow", at), YScalar(False, at)),), at)
            if condition is None:
                rules.append(
                    YMap(((YScalar("else", at), YMap(((YScalar("then", at), deny),), at)),), at)
                )
            else:
                rules.append(
                    YMap(
                        (
                            (YScalar("when", at), YScalar(condition, at)),
                            (YScalar("then", at), deny),
                        ),
                        at,
                    )
                )
        spec = step.get("spec")
        spec = spec if isinstance(spec, YMap) else YMap((), span)
        policy = spec.get("policy")
        policy = policy if isinstance(policy, YMap) else YMap((), span)
        admit = policy.get("admit")
        admit = admit if isinstance(admit, YMap) else YMap((), span)
        existing = admit.get("rules")
        old = existing.items if isinstance(existing, YSeq) else ()
        if not old:
            allow = YMap(((YScalar("allow", span), YScalar(True, span)),), span)
            old = (
                YMap(
                    ((YScalar("else", span), YMap(((YScalar("then", span), allow),), span)),), span
                ),
            )
        admit = admit.with_item("rules", YSeq((*rules, *old), span))
        step = step.with_item("spec", spec.with_item("policy", policy.with_item("admit", admit)))
    return enter_writes(step, writes) if writes is not None else step


def enter_writes(step: YMap, writes: YMap) -> YMap:
    """`step.enter` writes -> `set_ctx` of every admitting rule of `spec.policy.admit` (one
    rule that admits unconditionally when the step has none): made once per step run, when
    the step is admitted, before its tool and before a loop's first iteration."""
    span = writes.span
    spec = step.get("spec")
    spec = spec if isinstance(spec, YMap) else YMap((), span)
    policy = spec.get("policy")
    policy = policy if isinstance(policy, YMap) else YMap((), span)
    admit = policy.get("admit")
    rules = admit.get("rules") if isinstance(admit, YMap) else None
    if not isinstance(admit, YMap) or not isinstance(rules, YSeq):
        only = YMap(((YScalar("then", span), _admitting(YMap((), span), writes)),), span)
        admit = YMap(((YScalar("rules", span), YSeq((only,), span)),), span)
    else:
        new_rules: list[YNode] = []
        for rule in rules.items:
            then = rule.get("then") if isinstance(rule, YMap) else None
            otherwise = rule.get("else") if isinstance(rule, YMap) else None
            if isinstance(rule, YMap) and isinstance(then, YMap):
                rule = rule.with_item("then", _admitting(then, writes))
            elif isinstance(rule, YMap) and isinstance(otherwise, YMap):
                inner = otherwise.get("then")
                if isinstance(inner, YMap):
                    rule = rule.with_item(
                        "else", otherwise.with_item("then", _admitting(inner, writes))
                    )
            new_rules.append(rule)
        admit = admit.with_item("rules", YSeq(tuple(new_rules), rules.span))
    return step.with_item("spec", spec.with_item("policy", policy.with_item("admit", admit)))


def _admitting(then: YMap, writes: YMap) -> YMap:
    allow = then.get("allow")
    if isinstance(allow, YScalar) and allow.value is False:
        return then
    if allow is None:
        then = then.with_item("allow", YScalar(True, writes.span))
    return then.with_item("set_ctx", writes)


def flag_guard(flags: list[str]) -> str:
    return "{{ " + " or ".join(f"(ctx.{f} | default(false))" for f in flags) + " }}"


def loop_exit(step: YMap, flags: list[str], span: Span) -> YMap:
    """A loop step whose `call.done` rules route: `loop.spec.stop_when` ends the loop as soon
    as an iteration's rule set its flag (the flags are reset when the step is admitted)."""
    loop = step.get("loop")
    if not isinstance(loop, YMap):
        return step
    spec = loop.get("spec")
    spec = spec if isinstance(spec, YMap) else YMap((), span)
    spec = spec.with_item("stop_when", YScalar(flag_guard(flags), span))
    return step.with_item("loop", loop.with_item("spec", spec))


def refuse_inclusive(step: YMap, reporter: Reporter) -> None:
    spec = step.get("spec")
    key = step.key_node("case_mode") or (
        spec.key_node("case_mode") if isinstance(spec, YMap) else None
    )
    reporter.report(
        "NOE106",
        "`case_mode: inclusive` with several rules acting on the call is not supported",
        key.span if key is not None else step.span,
        hint="every matching rule's tasks would run in order: write them as tasks of the "
        "pipeline, each with its own policy rule, or keep `case_mode: exclusive`",
    )


def refuse_rule_keys(rule: YMap, reporter: Reporter) -> None:
    for name, hint in (
        (
            "retry",
            "retry each task instead: put `retry:` on the step's tool or on a task in `then` "
            "(re-running a whole chain is not supported)",
        ),
        ("spec", "a `case` rule has no settings; caching rule results is not supported"),
    ):
        key = rule.key_node(name)
        if key is not None:
            reporter.report(
                "NOE106", f"a `case` rule's `{name}:` is not supported", key.span, hint=hint
            )
