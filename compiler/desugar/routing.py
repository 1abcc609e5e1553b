"""The router of a step with a legacy `case:`: case arcs first, then the structural `next`.

Exclusive routing takes the first arc whose guard holds, so the case arcs (in rule order)
shadow the structural ones. An inclusive router (`case_mode: inclusive`) fires every arc that
holds, so the structural arcs get the explicit guard "no case rule routed".

A `call: {step, args}` action starts a step besides the routing (spec 003 §3): its arc must
fire together with the arcs of its rule, which an exclusive router cannot do. Such a router
becomes inclusive, and every other arc keeps its first-match meaning through its guard: it
fires when its own condition holds and none of the earlier arcs' conditions does. Every guard
then names the event it fires on (`event.name == 'step.done' and ...`): a negated condition
would otherwise also hold on `step.failed`.
"""

from __future__ import annotations

import re

from noetlc.compiler.desugar.common import guard_body
from noetlc.compiler.ynodes import YMap, YNode, YScalar, YSeq

_MENTIONS_EVENT = re.compile(r"\bevent\b")


def structural_arcs(nxt: YNode | None) -> list[YMap]:
    """The step's own `next` (string, list, or `{spec, arcs}`) as arc mappings."""
    if isinstance(nxt, YScalar) and nxt.value is not None:
        return [YMap(((YScalar("step", nxt.span), nxt),), nxt.span)]
    if isinstance(nxt, YSeq):
        out = []
        for entry in nxt.items:
            if isinstance(entry, YScalar):
                out.append(YMap(((YScalar("step", entry.span), entry),), entry.span))
            elif isinstance(entry, YMap):
                out.append(entry)
        return out
    if isinstance(nxt, YMap):
        arcs = nxt.get("arcs")
        return [a for a in arcs.items if isinstance(a, YMap)] if isinstance(arcs, YSeq) else []
    return []


def router_arcs(
    case_arcs: list[YMap],
    forks: set[int],
    case_guards: list[str],
    structural: list[YMap],
    mode: str,
    case_inclusive: bool,
    done: str,
) -> tuple[list[YMap], str]:
    """The arcs of the router and its mode."""
    if forks and mode == "exclusive":
        return _first_match_as_inclusive(case_arcs, forks, structural, done), "inclusive"
    arcs = list(case_arcs)
    for arc in structural:
        if case_inclusive and case_guards:
            # inclusive: the structural next fires only when no case rule routed
            none_fired = " and ".join(f"not ({g})" for g in case_guards)
            if _MENTIONS_EVENT.search(none_fired):
                none_fired = f"{effective(arc, done)} and {none_fired}"
            arc = arc.with_item("when", YScalar("{{ " + none_fired + " }}", arc.span))
        if not any(_same_arc(arc, other) for other in arcs):
            arcs.append(arc)
    return arcs, mode


def effective(arc: YMap, done: str) -> str:
    """The arc's condition with its event explicit (DESIGN §2.4: no `when` = succeeded; a
    `when` without `event` = succeeded and that guard)."""
    when = arc.get("when")
    if not isinstance(when, YScalar) or when.value in (None, True):
        return f"event.name == '{done}'"
    body = guard_body(str(when.value))
    if _MENTIONS_EVENT.search(body):
        return body
    return f"event.name == '{done}' and ({body})"


def _first_match_as_inclusive(
    case_arcs: list[YMap], forks: set[int], structural: list[YMap], done: str
) -> list[YMap]:
    out: list[YMap] = []
    earlier: list[str] = []  # conditions of the earlier first-match arcs
    for index, arc in enumerate([*case_arcs, *structural]):
        condition = effective(arc, done)
        fork = index in forks and index < len(case_arcs)
        if not fork and condition in earlier:
            continue  # shadowed by an earlier arc with the same condition: never fired
        if earlier:
            guard = " and ".join([condition, *(f"not ({c})" for c in earlier)])
            arc = arc.with_item("when", YScalar("{{ " + guard + " }}", arc.span))
        out.append(arc)
        if not fork:
            earlier.append(condition)
    return out


def _same_arc(a: YMap, b: YNode) -> bool:
    return (
        isinstance(b, YMap)
        and a.get("step") == b.get("step")
        and "when" not in a
        and "when" not in b
    )
