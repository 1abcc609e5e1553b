"""`next` entries with `when`/`then` (an older NoETL form) -> one arc per target.

The older form wrote a structural `next` list whose entries are conditions with the targets
under `then` (and an optional `else`):

    next:
      - when: "{{ workload.action == 'create' }}"
        then: [{step: create_cluster}]
        args: {}
      - else: [{step: usage}]

The entries are evaluated in order and the first whose `when` holds routes to its targets, so
each target becomes an arc with the entry's `when` (and the entry's `args` under the target's
own); an `else` entry's targets get no `when`. When one entry names several targets they
all start (a parallel fork): the router is then inclusive and each arc's guard says "this
entry holds and no earlier entry did", which keeps the first-match order.

Only `noetlc migrate` rewrites it: `check` rejects `then:`/`else:` in a `next` entry (NOE105)
and points at `migrate`.
"""

from __future__ import annotations

from noetlc.compiler.desugar.common import (
    condition_expression,
    guard_body,
    map_step_list,
    node,
    step_name,
)
from noetlc.compiler.shapes import routes
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq
from noetlc.diagnostics.report import Reporter


def run(doc: YMap, reporter: Reporter) -> YMap:
    def fix(step: YMap) -> YMap | None:
        written = routes(step.get("next"))
        if written.form not in ("list", "router") or written.node is None:
            return None
        if not any(isinstance(e, YMap) and ("then" in e or "else" in e) for e in written.entries):
            return None
        key = step.key_node("next")
        assert key is not None
        reporter.report(
            "NOE416", f"the `next` entries of step `{step_name(step)}` are arcs now", key.span
        )
        groups = [_group(entry) for entry in written.entries]
        fork = any(len(targets) > 1 for _, _, targets in groups)
        arcs: list[YNode] = []
        earlier: list[str] = []
        for when, condition, targets in groups:
            if not fork:  # first match: each target keeps the entry's `when` as written
                for target in targets:
                    has_own = "when" in target
                    arcs.append(
                        target if has_own or when is None else target.with_item("when", when)
                    )
                continue
            parts = [f"not ({c})" for c in earlier]
            if condition is not None:
                parts.insert(0, f"({condition})")
            guard = " and ".join(parts) if parts else None
            for target in targets:
                arc = target
                if guard is not None:
                    own = target.get("when")
                    text = guard
                    if isinstance(own, YScalar) and own.value not in (None, True):
                        text = f"({guard}) and ({guard_body(str(own.value))})"
                    arc = arc.with_item("when", YScalar("{{ " + text + " }}", target.span))
                arcs.append(arc)
            if condition is not None:
                earlier.append(condition)
        spec = {"mode": "inclusive" if fork else "exclusive"}
        return step.with_item("next", node({"spec": spec, "arcs": arcs}, written.node.span))

    return map_step_list(doc, fix)


def _group(entry: YNode) -> tuple[YNode | None, str | None, list[YMap]]:
    """An entry -> (its `when` node and condition, or None, and its target arcs)."""
    if isinstance(entry, YScalar):
        return None, None, [YMap(((YScalar("step", entry.span), entry),), entry.span)]
    if not isinstance(entry, YMap):
        return None, None, []
    if "then" not in entry and "else" not in entry:
        when = entry.get("when")
        text = _condition(when)
        return when, text, [entry.without("when")] if text is not None else [entry]
    otherwise = entry.get("else")
    body = entry.get("then") if "then" in entry else otherwise
    if isinstance(body, YMap) and "then" in body:
        body = body.get("then")
    when = entry.get("when") if "then" in entry else None
    condition = _condition(when)
    args = entry.get("args")
    targets: list[YMap] = []
    for item in body.items if isinstance(body, YSeq) else (body,):
        if isinstance(item, YScalar):
            item = YMap(((YScalar("step", item.span), item),), item.span)
        if not isinstance(item, YMap) or "step" not in item:
            continue
        if isinstance(args, YMap) and args.items:
            own = item.get("args")
            merged = args.items + (own.items if isinstance(own, YMap) else ())
            item = item.with_item("args", YMap(merged, args.span))
        targets.append(item)
    return (when if condition is not None else None), condition, targets


def _condition(when: YNode | None) -> str | None:
    if not isinstance(when, YScalar) or when.value in (None, True):
        return None
    return condition_expression(str(when.value))
