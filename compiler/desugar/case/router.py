"""The router of a step with a legacy `case:`: case arcs first, then the structural `next`.

Exclusive routing takes the first arc whose guard holds, so the case arcs (in rule order)
shadow the structural ones. An inclusive router (`case_mode: inclusive`) fires every arc that
holds, so the structural arcs get the explicit guard "no case rule routed".

A `call: {step, args}` action starts a step besides the routing (as NoETL's `case` does): its arc must
fire together with the arcs of its rule, which an exclusive router cannot do. Such a router
becomes inclusive, and every other arc keeps its first-match meaning as a stopping arc
(`spec: {stop: true}`): once it fired no later arc does, so each arc fires when its own
condition holds and none of the earlier stopping arcs' conditions does, like an exclusive
router's arcs. The guards stay linear in the number of arcs (the net negates the earlier
stopping arcs by rank, ir/README.md). Every guard names the event it fires on
(`event.name == 'step.done' and ...`), as an exclusive router's arcs are compared per event.
Consecutive first-match arcs to the same target (same args) become one arc firing when either
holds: the net then has one arc per target, and a downstream join is not fed twice by one
router.
"""

from __future__ import annotations

import re

from noetlc.compiler.desugar.common import guard_body
from noetlc.compiler.shapes import routes
from noetlc.compiler.ynodes import YMap, YNode, YScalar

_MENTIONS_EVENT = re.compile(r"\bevent\b")


def structural_arcs(nxt: YNode | None) -> list[YMap]:
    """The step's own `next` (string, list, or `{spec, arcs}`) as arc mappings."""
    out = []
    for entry in routes(nxt).entries:
        if isinstance(entry, YScalar):
            out.append(YMap(((YScalar("step", entry.span), entry),), entry.span))
        elif isinstance(entry, YMap):
            out.append(entry)
    return out


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
    if mode == "exclusive":
        structural = _absorb(arcs, structural, done)
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


def _absorb(case_arcs: list[YMap], structural: list[YMap], done: str) -> list[YMap]:
    """In an exclusive router, a structural arc right after a case arc to the same target
    (same args) is folded into it: one arc firing when either held (first-match order)."""
    if not case_arcs or not structural or not _same_target(case_arcs[-1], structural[0]):
        return structural
    union = _union([effective(case_arcs[-1], done), effective(structural[0], done)], done)
    merged = case_arcs[-1].without("when") if union == f"event.name == '{done}'" else None
    if merged is None:
        return structural
    case_arcs[-1] = merged
    return structural[1:]


def effective(arc: YMap, done: str) -> str:
    """The arc's condition with its event explicit (no `when` = succeeded; a
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
    entries = [(arc, i in forks) for i, arc in enumerate(case_arcs)]
    entries += [(arc, False) for arc in structural]
    kept: list[tuple[YMap, bool]] = []  # (arc with its own condition as guard, first-match)
    earlier: set[str] = set()  # conditions of the earlier first-match arcs
    for arc, fork, condition in _coalesce(entries, done):
        if not fork and condition in earlier:
            continue  # shadowed by an earlier arc with the same condition: never fired
        if condition == f"event.name == '{done}'":
            arc = arc.without("when")
        else:
            arc = arc.with_item("when", YScalar("{{ " + condition + " }}", arc.span))
        kept.append((arc, not fork))
        if not fork:
            earlier.add(condition)
    # a first-match arc stops the routing; the last arc has nothing after it to stop
    return [
        _stopping(arc) if first_match and i < len(kept) - 1 else arc
        for i, (arc, first_match) in enumerate(kept)
    ]


def _stopping(arc: YMap) -> YMap:
    spec = arc.get("spec")
    entries = spec.items if isinstance(spec, YMap) else ()
    stop = (YScalar("stop", arc.span), YScalar(True, arc.span))
    return arc.with_item("spec", YMap((*entries, stop), arc.span))


def _coalesce(entries: list[tuple[YMap, bool]], done: str) -> list[tuple[YMap, bool, str]]:
    """Consecutive first-match arcs to the same target (same args) as one arc whose condition
    is the union of theirs: first-match order fires exactly one of them when any holds."""
    out: list[tuple[YMap, bool, list[str]]] = []
    for arc, fork in entries:
        condition = effective(arc, done)
        last = out[-1] if out else None
        if last is not None and not fork and not last[1] and _same_target(last[0], arc):
            last[2].append(condition)
            continue
        out.append((arc, fork, [condition]))
    return [(arc, fork, _union(conditions, done)) for arc, fork, conditions in out]


def _union(conditions: list[str], done: str) -> str:
    succeeded = f"event.name == '{done}'"
    if succeeded in conditions and all(
        c == succeeded or c.startswith(succeeded + " and ") for c in conditions
    ):
        return succeeded  # every one of them implies "succeeded", and one is exactly that
    unique = list(dict.fromkeys(conditions))
    return unique[0] if len(unique) == 1 else " or ".join(f"({c})" for c in unique)


def _same_target(a: YMap, b: YMap) -> bool:
    return a.without("when") == b.without("when")


def _same_arc(a: YMap, b: YNode) -> bool:
    return (
        isinstance(b, YMap)
        and a.get("step") == b.get("step")
        and "when" not in a
        and "when" not in b
    )
