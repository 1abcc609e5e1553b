"""The colored Petri-net IR: places, transitions, arcs, guards, inscriptions.

A playbook lowers to one net (see `ir/README.md` for the fragment of every construct). Tokens
are colored: they carry `args` (the arc inscription), a fork context (which inclusive fork and
branch they descend from, for joins) and, inside loops, an iteration index. Guards and
inscriptions are indexes into the playbook's expression pool; the net itself holds no code.

Nodes are frozen slotted dataclasses with tuple children; `span` (the YAML position, for the
debug map) is excluded from equality. `dump()` is the deterministic text form, `verify()` the
structural verifier run after the net is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

PlaceKind = Literal[
    "entry",  # a token arrives at a step (before admission)
    "running",  # the step's pipeline runs (or its loop iterates)
    "done",  # the step finished: its boundary event is step.done / loop.done
    "failed",  # the step failed: step.failed
    "skipped",  # admission denied: step.skipped (a dead path starts here)
    "slots",  # a loop's bounded counter place: max_in_flight free slots
    "pending",  # loop iterations not yet started
    "iterating",  # loop iterations in flight
    "branch",  # one incoming arc of an AND-join (live or dead tokens)
    "waiting",  # a listener step waits for a signal or its timer
    "sink",  # the execution's end: completed tokens
    "failure",  # the execution failed (an unhandled step failure)
]

TransitionKind = Literal[
    "start",  # entry -> running (no admission rules)
    "admit",  # entry -> running when an admission rule allows
    "skip",  # entry -> skipped when admission denies
    "complete",  # running -> done (the pipeline VM reported success)
    "fail",  # running -> failed
    "loop_start",  # running: evaluate `in`, fill pending, emit loop.started
    "iter_start",  # pending + slot -> iterating (dispatch one iteration)
    "iter_end",  # iterating -> slot (an iteration finished)
    "loop_done",  # all iterations finished -> done (loop.done)
    "route",  # done/failed -> an arc's target (guarded)
    "dead",  # an arc not taken: a dead token toward a join (dead-path elimination)
    "join",  # all branches of a fork arrived or are dead -> the join step's entry
    "signal",  # a listener step receives a matching event
    "timer",  # a listener step's timeout fired
    "end",  # a step's token ends (final step, or no arc matched after success)
    "unhandled",  # a failed step with no matching arc: the execution fails
]

JoinKind = Literal["all", "any", "each"]


@dataclass(frozen=True, slots=True)
class Position:
    """A source position (file, line, column)."""

    file: str
    line: int
    column: int
    path: str  # the YAML path, e.g. workflow[2].next.arcs[0]


NO_POSITION = Position("<generated>", 0, 0, "")


@dataclass(frozen=True, slots=True)
class Place:
    """One place of the net."""

    id: str
    kind: PlaceKind
    step: str | None = None
    capacity: int | None = None  # bounded places (loop slots)
    pos: Position = field(default=NO_POSITION, compare=False)


@dataclass(frozen=True, slots=True)
class Guard:
    """g_expr ∧ ¬g_negated… ∧ ¬(each of the first `earlier` guards of the decision at the
    transition's input place); all indexes into the expression pool.

    Exclusive routing refers to the earlier arcs by rank instead of copying their guards, so a
    router of n arcs holds O(n) guard data, not O(n²) (`negations` spells them out)."""

    expr: int | None = None  # None: true
    negated: tuple[int, ...] = ()  # explicit negations (a dead arc: its own arc's guard)
    earlier: int = 0  # exclusive routing: the first `earlier` guards of the decision are false


@dataclass(frozen=True, slots=True)
class Decision:
    """The guards of one decision place's arcs (or admission rules), in YAML order.

    Only guarded ones count (an unguarded arc ends the list: nothing after it can fire)."""

    place: str
    guards: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Transition:
    """One transition of the net."""

    id: str
    kind: TransitionKind
    step: str | None
    consume: tuple[str, ...]  # input places (weight 1 each)
    produce: tuple[str, ...]  # output places
    guard: Guard = Guard()
    events: tuple[str, ...] = ()  # the boundary events this transition reacts to
    args: int | None = None  # arc inscription: index into the value pool (the new token's args)
    writes: int | None = None  # ctx writes when it fires: index into the value pool
    target: str | None = None  # route/dead/join: the step the token goes to
    pos: Position = field(default=NO_POSITION, compare=False)


@dataclass(frozen=True, slots=True)
class Join:
    """One join: the step, its kind, and the fork whose branches it joins."""

    step: str
    kind: JoinKind
    fork: str | None  # the inclusive fork step whose branches it joins (None: explicit)
    branches: tuple[str, ...]  # the branch places, one per incoming arc


@dataclass(frozen=True, slots=True)
class Net:
    """The colored Petri net of a playbook."""

    name: str
    entry_step: str
    places: tuple[Place, ...]
    transitions: tuple[Transition, ...]
    joins: tuple[Join, ...] = ()
    decisions: tuple[Decision, ...] = ()


class NetError(Exception):
    """The verifier found the net malformed (a compiler bug or hand-broken IR text)."""


def verify(net: Net) -> list[str]:
    """Structural checks; returns the problems found (empty when the net is well formed)."""
    problems: list[str] = []
    place_ids = [p.id for p in net.places]
    seen: set[str] = set()
    for pid in place_ids:
        if pid in seen:
            problems.append(f"duplicate place {pid}")
        seen.add(pid)
    transition_ids: set[str] = set()
    consumers: dict[str, int] = {}
    producers: dict[str, int] = {}
    for t in net.transitions:
        if t.id in transition_ids:
            problems.append(f"duplicate transition {t.id}")
        transition_ids.add(t.id)
        if not t.consume:
            problems.append(f"transition {t.id} consumes nothing")
        for pid in (*t.consume, *t.produce):
            if pid not in seen:
                problems.append(f"transition {t.id} refers to unknown place {pid}")
        for pid in t.consume:
            consumers[pid] = consumers.get(pid, 0) + 1
        for pid in t.produce:
            producers[pid] = producers.get(pid, 0) + 1
        if t.kind in ("route", "dead", "join") and t.target is None:
            problems.append(f"{t.kind} transition {t.id} has no target step")
    for p in net.places:
        if p.kind not in ("sink", "failure") and consumers.get(p.id, 0) == 0:
            problems.append(f"place {p.id} has no consumer (tokens would be stranded)")
        if p.kind == "slots" and (p.capacity is None or p.capacity < 1):
            problems.append(f"slot place {p.id} needs a capacity >= 1")
    decisions: dict[str, tuple[int, ...]] = {}
    for d in net.decisions:
        if d.place in decisions:
            problems.append(f"duplicate decision {d.place}")
        elif d.place not in seen:
            problems.append(f"decision at unknown place {d.place}")
        decisions[d.place] = d.guards
    for t in net.transitions:
        if t.guard.earlier < 0:
            problems.append(f"transition {t.id} negates a negative number of earlier guards")
        elif t.guard.earlier and len(decisions.get(t.consume[0] if t.consume else "", ())) < (
            t.guard.earlier
        ):
            problems.append(
                f"transition {t.id} negates {t.guard.earlier} earlier guards; the decision "
                f"at its input place has fewer"
            )
    entry = f"{net.entry_step}.entry"
    if entry not in seen:
        problems.append(f"entry place {entry} is missing")
    return problems


def dump(net: Net) -> str:
    """The deterministic text form of the net."""
    out = [f"net {net.name} entry {net.entry_step}"]
    for p in net.places:
        cap = f" capacity={p.capacity}" if p.capacity is not None else ""
        step = f" step={p.step}" if p.step else ""
        out.append(f"  place {p.id} {p.kind}{step}{cap}")
    for t in net.transitions:
        parts = [f"  trans {t.id} {t.kind}"]
        parts.append("in(" + ", ".join(t.consume) + ")")
        parts.append("out(" + ", ".join(t.produce) + ")")
        if t.events:
            parts.append("on(" + ", ".join(t.events) + ")")
        guard = _guard_text(t.guard)
        if guard:
            parts.append(f"guard({guard})")
        if t.target:
            parts.append(f"to={t.target}")
        if t.args is not None:
            parts.append(f"args=v{t.args}")
        if t.writes is not None:
            parts.append(f"set_ctx=v{t.writes}")
        if t.pos.line:
            parts.append(f"@{t.pos.line}")
        out.append(" ".join(parts))
    for j in net.joins:
        out.append(
            f"  join {j.step} {j.kind} fork={j.fork or '-'} branches({', '.join(j.branches)})"
        )
    for d in net.decisions:
        out.append(f"  decision {d.place} guards({', '.join(f'e{g}' for g in d.guards)})")
    return "\n".join(out) + "\n"


def _guard_text(guard: Guard) -> str:
    parts = []
    if guard.expr is not None:
        parts.append(f"e{guard.expr}")
    parts.extend(f"!e{n}" for n in guard.negated)
    if guard.earlier:
        parts.append(f"!earlier({guard.earlier})")
    return " & ".join(parts)


def decision_guards(net: Net) -> dict[str, tuple[int, ...]]:
    """Each decision place's guards in order (build once, then `negations` per transition)."""
    return {d.place: d.guards for d in net.decisions}


def negations(t: Transition, decisions: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    """Every guard `t` requires false, spelled out: the decision's first `earlier` guards, then
    the explicit ones. O(earlier): for analyses that reason about each negation."""
    if not t.guard.earlier:
        return t.guard.negated
    return decisions[t.consume[0]][: t.guard.earlier] + t.guard.negated
