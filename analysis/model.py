"""The token system the soundness check works on, built from the net.

Inside a step everything is one token's business: admission, the pipeline (or the loop around
it), success or failure, the routing decision on the boundary event. So each step becomes one
*node* whose moves are its complete *outcomes*: "admitted, succeeded, arcs 0 and 2 fired"
produces tokens at the targets' places; "failed, no arc handles it" fails the execution.
Guards are abstracted to "either way" except where `guards.truth` decides them (constants,
`event.name` tests), and exclusive routing keeps its negations, so an outcome is one
consistent assignment of the guards involved.

Tokens are live or dead (dead-path elimination). A dead token at a step's entry passes the
step without running it, toward the AND-joins downstream (as the control VM's
`propagate_dead` does); a join fires when every branch place holds a token, and its output is
dead only if every consumed token was.

Slots number (place, color) pairs: `slot = 2 * place_index + color` (0 live, 1 dead).
A marking is a sorted tuple of (slot, count).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product

from noetlc.analysis.context import LintContext
from noetlc.analysis.guards import truth
from noetlc.ir.net import Position, Transition

LIVE, DEAD = 0, 1
CONTINUE, FAILURE, TRAPPED = 0, 1, 2  # outcome ends: nothing, the execution fails, reported
MAX_GUARD_VARIABLES = 12

Marking = tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Item:
    step: str | None
    transition: str
    pos: Position


class Path:
    """A counterexample path built by concatenation in O(1) (reductions concatenate a lot)."""

    __slots__ = ("items", "left", "length", "right")

    def __init__(
        self,
        items: tuple[Item, ...] = (),
        left: Path | None = None,
        right: Path | None = None,
    ) -> None:
        self.items = items
        self.left = left
        self.right = right
        self.length: int = (
            len(items) + (left.length if left else 0) + (right.length if right else 0)
        )

    def __add__(self, other: Path) -> Path:
        if not other.length:
            return self
        if not self.length:
            return other
        return Path((), self, other)

    def flatten(self) -> list[Item]:
        out: list[Item] = []
        stack: list[Path] = [self]
        while stack:
            node = stack.pop()
            if node.left is None and node.right is None:
                out.extend(node.items)
                continue
            if node.right is not None:
                stack.append(node.right)
            if node.left is not None:
                stack.append(node.left)
        return out


EMPTY = Path()


@dataclass(slots=True)
class Outcome:
    prods: Marking
    end: int
    path: Path

    def key(self) -> tuple[Marking, int]:
        return (self.prods, self.end)


@dataclass(frozen=True, slots=True)
class JoinRule:
    branches: tuple[int, ...]  # branch place indexes
    target: int  # the join step's entry place index
    path: Path


@dataclass
class System:
    places: list[str]
    index: dict[str, int]
    initial: int  # the entry step's entry place index
    step_of: dict[int, str]  # entry place index -> step
    outcomes: dict[int, list[Outcome]] = field(default_factory=dict)  # live token at a node
    dead_rules: dict[int, Marking] = field(default_factory=dict)  # dead token at a node
    joins: dict[int, JoinRule] = field(default_factory=dict)  # by join entry place
    branch_join: dict[int, int] = field(default_factory=dict)  # branch place -> join entry
    approximate: list[str] = field(default_factory=list)  # decisions not fully enumerated

    def slot(self, place: str, color: int) -> int:
        return 2 * self.index[place] + color


def add(marking: dict[int, int], slot: int, count: int = 1) -> None:
    marking[slot] = marking.get(slot, 0) + count


def freeze(marking: dict[int, int]) -> Marking:
    return tuple(sorted((s, c) for s, c in marking.items() if c))


def build(ctx: LintContext) -> System:
    net = ctx.net
    places = [p.id for p in net.places]
    index = {p: i for i, p in enumerate(places)}
    step_of = {index[f"{s}.entry"]: s for s in ctx.steps if f"{s}.entry" in index}
    system = System(places, index, index[f"{net.entry_step}.entry"], step_of)
    builder = _Builder(ctx, system)
    for entry, step in step_of.items():
        system.dead_rules[entry] = builder.dead_rule(step)
        system.outcomes[entry] = builder.outcomes(step)
    for t in net.transitions:
        if t.kind == "join" and t.produce:
            target = index[t.produce[0]]
            branches = tuple(index[p] for p in t.consume)
            system.joins[target] = JoinRule(branches, target, _path(t))
            for b in branches:
                system.branch_join[b] = target
    return system


def _path(*ts: Transition) -> Path:
    return Path(tuple(Item(t.step, t.id, t.pos) for t in ts))


class _Builder:
    def __init__(self, ctx: LintContext, system: System) -> None:
        self.ctx = ctx
        self.system = system
        self.by_place = ctx.transitions_by_place

    def dead_rule(self, step: str) -> Marking:
        """Where a dead token at the step's entry goes (the control VM's propagate_dead)."""
        out: dict[int, int] = {}
        for t in self.by_place.get(f"{step}.done", []):
            if t.kind not in ("route", "dead"):
                continue
            for place in t.produce:
                if place == "execution.sink" or self.system.slot(place, DEAD) in out:
                    continue
                target = place.rsplit(".", 1)[0] if place.endswith(".entry") else None
                if ".from." in place or (target is not None and self._leads_to_join(target)):
                    out[self.system.slot(place, DEAD)] = 1
        return freeze(out)

    def _leads_to_join(self, step: str) -> bool:
        return any(t.kind == "dead" for t in self.by_place.get(f"{step}.done", []))

    def outcomes(self, step: str) -> list[Outcome]:
        found: dict[tuple[Marking, int], Outcome] = {}
        info = self.ctx.steps[step]
        for admit in self.by_place.get(f"{step}.entry", []):
            if admit.kind not in ("start", "admit", "skip"):
                continue
            if self.ctx.transition_truth(admit, None) is False:
                continue
            if admit.kind == "skip":
                ends = [t for t in self.by_place.get(f"{step}.skipped", []) if t.kind == "end"]
                dead = self.system.dead_rules[self.system.index[f"{step}.entry"]]
                out = Outcome(dead, CONTINUE, _path(admit, *ends))
                found.setdefault(out.key(), out)
                continue
            if info.loop is not None:
                done_t = self._one(f"{step}.slots", "loop_done")
                fail_t = self._one(f"{step}.slots", "fail")
            else:
                done_t = self._one(f"{step}.running", "complete")
                fail_t = self._one(f"{step}.running", "fail")
            for run, place in ((done_t, f"{step}.done"), (fail_t, f"{step}.failed")):
                if run is None:
                    continue
                prefix = _path(admit, run)
                waiting = f"{step}.waiting"
                listen = [t for t in self.by_place.get(place, []) if waiting in t.produce]
                if listen:
                    prefix = prefix + _path(listen[0])
                    place = f"{step}.waiting"
                for out in self.decide(place, prefix):
                    found.setdefault(out.key(), out)
        return list(found.values())

    def _one(self, place: str, kind: str) -> Transition | None:
        return next((t for t in self.by_place.get(place, []) if t.kind == kind), None)

    def decide(self, place: str, prefix: Path) -> list[Outcome]:
        """Every consistent firing set of the decision at `place`, one outcome each."""
        outcomes: list[Outcome] = []
        pool = self.ctx.pool.entries
        listener = place.endswith(".waiting")
        for event in self.ctx.place_events(place):
            candidates: list[tuple[Transition, list[tuple[int, bool]]]] = []
            for t in self.by_place.get(place, []):
                if t.kind not in ("route", "dead", "end", "unhandled") or event not in t.events:
                    continue
                literals: list[tuple[int, bool]] = []
                possible = True
                parts = ([(t.guard.expr, True)] if t.guard.expr is not None else []) + [
                    (n, False) for n in self.ctx.negations(t)
                ]
                for index, positive in parts:
                    value = truth(pool[index], None if listener else event)
                    if value is None:
                        literals.append((index, positive))
                    elif value != positive:
                        possible = False
                if possible:
                    candidates.append((t, literals))
            variables = sorted({i for _, lits in candidates for i, _ in lits})
            if len(variables) > MAX_GUARD_VARIABLES:
                self.system.approximate.append(place)
                assignments = _few_assignments(variables)
            else:
                assignments = [
                    dict(zip(variables, values, strict=True))
                    for values in product((False, True), repeat=len(variables))
                ]
            seen: set[tuple[Marking, int]] = set()
            for assignment in assignments:
                firing = [
                    t for t, lits in candidates if all(assignment[i] == pos for i, pos in lits)
                ]
                out = self._outcome(firing, prefix)
                if out.key() not in seen:
                    seen.add(out.key())
                    outcomes.append(out)
        return outcomes

    def _outcome(self, firing: list[Transition], prefix: Path) -> Outcome:
        prods: dict[int, int] = {}
        end = CONTINUE
        for t in firing:
            if t.kind == "unhandled":
                end = FAILURE
            elif t.kind in ("route", "dead"):
                for place in t.produce:
                    if place not in ("execution.sink", "execution.failure"):
                        add(prods, self.system.slot(place, LIVE if t.kind == "route" else DEAD))
        if end == FAILURE:
            prods = {}
        return Outcome(freeze(prods), end, prefix + _path(*firing))


def _few_assignments(variables: list[int]) -> list[dict[int, bool]]:
    """Too many guards to enumerate: all false, all true, and each one alone true."""
    out = [dict.fromkeys(variables, False), dict.fromkeys(variables, True)]
    for v in variables:
        one = dict.fromkeys(variables, False)
        one[v] = True
        out.append(one)
    return out
