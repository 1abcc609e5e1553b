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
from noetlc.ir.cycles import back_edges
from noetlc.ir.net import Position, Transition

LIVE, DEAD = 0, 1
CONTINUE, FAILURE, TRAPPED = 0, 1, 2  # outcome ends: nothing, the execution fails, reported
MAX_GUARD_VARIABLES = 12

Marking = tuple[tuple[int, int], ...]
OutcomeKey = tuple[Marking, int, bool]


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


def reachable_steps(system: System, outcomes: dict[int, list[Outcome]]) -> set[str]:
    """The steps a live token can reach, joins counted as reached when every branch can get a
    token (live or dead) and one a live one: an over-approximation (orders and counts are
    ignored), so a step it leaves out never runs. `outcomes` is the system before reduction
    (the reduction merges outcomes of equal effect and keeps one path)."""
    live: set[int] = {system.initial}
    dead: set[int] = set()
    todo = [(system.initial, LIVE)]
    any_branch = system.any_branch

    def arrive(place: int, color: int) -> None:
        seen = live if color == LIVE else dead
        if place in seen:
            return
        seen.add(place)
        todo.append((place, color))

    while todo:
        place, color = todo.pop()
        if place in outcomes:
            prods = (
                [s for o in outcomes[place] for s, _ in o.prods]
                if color == LIVE
                else [s for s, _ in system.dead_rules.get(place, ())]
            )
            for s in prods:
                arrive(s // 2, s % 2)
        elif place in any_branch and color == LIVE:
            arrive(any_branch[place], LIVE)
        elif place in system.branch_join:
            rule = system.joins[system.branch_join[place]]
            if all(b in live or b in dead for b in rule.branches):
                arrive(rule.target, LIVE if any(b in live for b in rule.branches) else DEAD)
    return {system.step_of[p] for p in live if p in system.step_of}


def steps_run(paths: list[Path]) -> set[str]:
    """The steps some path starts (admitted, not skipped); shared sub-paths are walked once."""
    seen: set[int] = set()
    out: set[str] = set()
    stack = list(paths)
    while stack:
        p = stack.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        for item in p.items:
            if item.step is not None and (
                item.transition.endswith(".start") or ".admit#" in item.transition
            ):
                out.add(item.step)
        if p.left is not None:
            stack.append(p.left)
        if p.right is not None:
            stack.append(p.right)
    return out


@dataclass(slots=True)
class Outcome:
    prods: Marking
    end: int
    path: Path
    # its dead tokens arrive (and settle) before its live ones: an outcome the reduction
    # composed of two decisions, the first one's arc not taken, the second one's taken. One
    # decision alone sends its live tokens first (vm/routing.py `route`). The order matters
    # at a merge that counts dead arrivals (a live one resets the count)
    early: bool = False

    def key(self) -> OutcomeKey:
        return (self.prods, self.end, self.early)


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
    # dead-path elimination as the control VM does it (vm/tables.py): the places on the way to
    # an AND-join each step's decisions feed, the step entries its arcs reach by a back edge,
    # and for each merge on such a path (a step of several forward predecessors whose dead
    # token must wait for all of them) the place that counts its dead arrivals
    feeds: dict[int, tuple[int, ...]] = field(default_factory=dict)  # entry -> places
    back: dict[int, frozenset[int]] = field(default_factory=dict)  # entry -> entries
    alternatives: dict[int, int] = field(default_factory=dict)  # merge entry -> predecessors
    counter: dict[int, int] = field(default_factory=dict)  # merge entry -> its count place
    any_branch: dict[int, int] = field(default_factory=dict)  # `any` join branch -> its entry
    ran_flag: dict[int, int] = field(default_factory=dict)  # `any` join entry -> has-run place

    @property
    def stateful(self) -> bool:
        """Merges that count and `any` joins keep state the structural reduction loses."""
        return bool(self.counter or self.any_branch)

    def slot(self, place: str, color: int) -> int:
        return 2 * self.index[place] + color


def add(marking: dict[int, int], slot: int, count: int = 1) -> None:
    marking[slot] = marking.get(slot, 0) + count


def freeze(marking: dict[int, int]) -> Marking:
    return tuple(sorted((s, c) for s, c in marking.items() if c))


Events = dict[tuple[int, str], bool]  # (guard, event) -> its value in a scenario


def build(
    ctx: LintContext, fixed: dict[int, bool] | None = None, events: Events | None = None
) -> System:
    """The token system; `fixed` gives the value of the guards a scenario decides, `events`
    of those that also test the event's name, at each event."""
    net = ctx.net
    places = [p.id for p in net.places]
    index = {p: i for i, p in enumerate(places)}
    step_of = {index[f"{s}.entry"]: s for s in ctx.steps if f"{s}.entry" in index}
    system = System(places, index, index[f"{net.entry_step}.entry"], step_of)
    _dead_paths(ctx, system)
    builder = _Builder(ctx, system, fixed or {}, events or {})
    for entry, step in step_of.items():
        system.dead_rules[entry] = builder.dead_rule(step)
        system.outcomes[entry] = builder.outcomes(step)
    kinds = {j.step: j.kind for j in net.joins}
    for t in net.transitions:
        if t.kind == "join" and t.produce and kinds.get(t.step or "") == "any":
            # an `any` join lets a live token in while the step has not run and drops the
            # rest (vm/joins.py): a flag place says it ran
            target = index[t.produce[0]]
            system.ran_flag[target] = len(system.places)
            system.places.append(f"{t.step}.has_run")
            for p in t.consume:
                system.any_branch[index[p]] = target
            continue
        if t.kind == "join" and t.produce:
            target = index[t.produce[0]]
            branches = tuple(index[p] for p in t.consume)
            system.joins[target] = JoinRule(branches, target, _path(t))
            for b in branches:
                system.branch_join[b] = target
    return system


def reading(ctx: LintContext, template: System, guards: set[int]) -> list[str]:
    """The steps whose admission or decision reads one of `guards` (`specialise` redoes
    their outcomes)."""
    by_place = ctx.transitions_by_place
    out = []
    for step in template.step_of.values():
        places = (f"{step}.entry", f"{step}.done", f"{step}.waiting", f"{step}.failed")
        if any(
            t.guard.expr in guards or not guards.isdisjoint(ctx.negations(t))
            for place in places
            for t in by_place.get(place, ())
        ):
            out.append(step)
    return out


def specialise(
    ctx: LintContext,
    template: System,
    fixed: dict[int, bool],
    steps: list[str] | None = None,
    events: Events | None = None,
) -> System:
    """`build(ctx, fixed)` from a template built without `fixed`: every part is copied (the
    reduction rewrites its system) and only the steps whose admission or decision reads a
    guard `fixed` decides get their outcomes again (the scenarios of a large playbook each
    rebuilt every step)."""
    system = System(
        template.places[:],
        template.index,
        template.initial,
        template.step_of,
        outcomes=dict(template.outcomes),
        dead_rules=dict(template.dead_rules),
        joins=template.joins,
        branch_join=template.branch_join,
        feeds=template.feeds,
        back=template.back,
        alternatives=template.alternatives,
        counter=dict(template.counter),
        any_branch=template.any_branch,
        ran_flag=template.ran_flag,
    )
    builder = _Builder(ctx, system, fixed, events or {})
    redone: set[str] = set()
    index = template.index
    guards = set(fixed) | {i for i, _ in events or {}}
    for step in reading(ctx, template, guards) if steps is None else steps:
        redone.update((f"{step}.entry", f"{step}.done", f"{step}.waiting", f"{step}.failed"))
        system.outcomes[index[f"{step}.entry"]] = builder.outcomes(step)
    kept = [a for a in template.approximate if a not in redone]
    system.approximate = list(dict.fromkeys(kept + system.approximate))
    return system


def _path(*ts: Transition) -> Path:
    return Path(tuple(Item(t.step, t.id, t.pos) for t in ts))


def _routes(ctx: LintContext, step: str) -> list[Transition]:
    """The step's decisions as the control VM's tables hold them: route, dead and end on
    `done` (or a listener's `waiting`), route and unhandled on `failed`."""
    by_place = ctx.transitions_by_place
    out = [
        t
        for place in (f"{step}.done", f"{step}.waiting")
        for t in by_place.get(place, ())
        if t.kind in ("route", "dead", "end")
    ]
    out += [t for t in by_place.get(f"{step}.failed", ()) if t.kind in ("route", "unhandled")]
    return out


def _dead_paths(ctx: LintContext, system: System) -> None:
    """The facts of dead-path elimination, computed as vm/tables.py computes them from the
    control program: join feeds, back targets, alternatives of merges."""
    routes = {step: _routes(ctx, step) for step in ctx.steps}
    successors: dict[str, list[str]] = {}
    walk: dict[str, list[str]] = {}  # also through joins: where the back arcs are found
    for step, ts in routes.items():
        nexts: dict[str, None] = {}
        through: dict[str, None] = {}
        for t in ts:
            if t.kind == "route":
                for place in t.produce:
                    if place.endswith(".entry"):
                        nexts[place[: -len(".entry")]] = None
                        through[place[: -len(".entry")]] = None
                    elif ".from." in place:
                        through[place.split(".from.", 1)[0]] = None
        successors[step] = list(nexts)
        walk[step] = list(through)
    back = back_edges((ctx.net.entry_step, *ctx.steps), walk)
    preds: dict[str, set[str]] = {s: set() for s in ctx.steps}
    for step, targets in successors.items():
        for nxt in targets:
            if nxt in preds and (step, nxt) not in back:
                preds[nxt].add(step)
    # steps whose arcs can reach a join's branch place (vm/tables.py's fixpoint, computed
    # backward from the branch places in one pass)
    feeders: dict[str, set[str]] = {}  # step -> the steps with a route or dead arc to it
    on_path: set[str] = set()
    for step, ts in routes.items():
        for t in ts:
            for place in t.produce:
                if ".from." in place:
                    on_path.add(step)
                elif place.endswith(".entry"):
                    feeders.setdefault(place[: -len(".entry")], set()).add(step)
    todo = list(on_path)
    while todo:
        for source in feeders.get(todo.pop(), ()):
            if source not in on_path:
                on_path.add(source)
                todo.append(source)

    def feeds_join(place: str) -> bool:
        return ".from." in place or (
            place.endswith(".entry") and place[: -len(".entry")] in on_path
        )

    back_of: dict[str, set[str]] = {}
    for source, target in back:
        back_of.setdefault(source, set()).add(target)
    index = system.index
    for step, ts in routes.items():
        entry = index.get(f"{step}.entry")
        if entry is None:
            continue
        backs = back_of.get(step, set())
        feeds: dict[int, None] = {}
        for t in ts:
            for place in t.produce:
                if place == "execution.sink" or place not in index:
                    continue
                is_back = place.endswith(".entry") and place[: -len(".entry")] in backs
                if feeds_join(place) and not is_back:
                    feeds[index[place]] = None
        if feeds:
            system.feeds[entry] = tuple(feeds)
        system.back[entry] = frozenset(index[f"{n}.entry"] for n in backs)
        if len(preds[step]) > 1 and feeds:
            system.alternatives[entry] = len(preds[step])
            system.counter[entry] = len(system.places)
            system.places.append(f"{step}.dead_arrivals")


class _Builder:
    def __init__(
        self, ctx: LintContext, system: System, fixed: dict[int, bool], events: Events
    ) -> None:
        self.ctx = ctx
        self.system = system
        self.fixed = fixed
        self.events = events
        self.by_place = ctx.transitions_by_place

    def dead_rule(self, step: str) -> Marking:
        """Where a dead token at the step's entry goes: a dead token on every place of its
        join feeds (the control VM's `_announce_dead`)."""
        entry = self.system.index[f"{step}.entry"]
        return freeze({2 * p + DEAD: 1 for p in self.system.feeds.get(entry, ())})

    def _truth(self, index: int, event: str | None) -> bool | None:
        value = self.fixed.get(index)
        if value is None and event is not None and self.events:
            value = self.events.get((index, event))
        if value is not None:
            return value
        return truth(self.ctx.pool.entries[index], event)

    def _admits(self, admit: Transition) -> bool:
        if not self.fixed:
            return self.ctx.transition_truth(admit, None) is not False
        parts = [(admit.guard.expr, True)] if admit.guard.expr is not None else []
        parts += [(n, False) for n in self.ctx.negations(admit)]
        for index, positive in parts:
            value = self._truth(index, None)
            if value is not None and value != positive:
                return False
        return self.ctx.transition_truth(admit, None) is not False

    def outcomes(self, step: str) -> list[Outcome]:
        found: dict[OutcomeKey, Outcome] = {}
        info = self.ctx.steps[step]
        entry = self.system.index[f"{step}.entry"]
        for admit in self.by_place.get(f"{step}.entry", []):
            if admit.kind not in ("start", "admit", "skip"):
                continue
            if not self._admits(admit):
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
                for out in self.decide(place, prefix, entry):
                    found.setdefault(out.key(), out)
        return list(found.values())

    def _one(self, place: str, kind: str) -> Transition | None:
        return next((t for t in self.by_place.get(place, []) if t.kind == kind), None)

    def decide(self, place: str, prefix: Path, entry: int) -> list[Outcome]:
        """Every consistent firing set of the decision at `place`, one outcome each."""
        outcomes: list[Outcome] = []
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
                    value = self._truth(index, None if listener else event)
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
            seen: set[OutcomeKey] = set()
            for assignment in assignments:
                firing = [
                    t for t, lits in candidates if all(assignment[i] == pos for i, pos in lits)
                ]
                out = self._outcome(firing, prefix, entry)
                if out.key() not in seen:
                    seen.add(out.key())
                    outcomes.append(out)
        return outcomes

    def _outcome(self, firing: list[Transition], prefix: Path, entry: int) -> Outcome:
        """What one decision does (vm/routing.py `_route`): routes put live tokens; an
        unhandled failure ends the execution; then every join feed the decision did not feed
        gets a dead token, unless a back edge fired (the cycle decides again)."""
        prods: dict[int, int] = {}
        for t in firing:
            if t.kind == "unhandled":
                return Outcome((), FAILURE, prefix + _path(*firing))
            if t.kind == "route":
                for place in t.produce:
                    if place not in ("execution.sink", "execution.failure"):
                        add(prods, self.system.slot(place, LIVE))
        feeds = self.system.feeds.get(entry, ())
        if feeds and not any(s // 2 in self.system.back.get(entry, ()) for s in prods):
            for feed in feeds:
                if 2 * feed + LIVE not in prods:
                    add(prods, 2 * feed + DEAD)
        return Outcome(freeze(prods), CONTINUE, prefix + _path(*firing))


def _few_assignments(variables: list[int]) -> list[dict[int, bool]]:
    """Too many guards to enumerate: all false, all true, and each one alone true."""
    out = [dict.fromkeys(variables, False), dict.fromkeys(variables, True)]
    for v in variables:
        one = dict.fromkeys(variables, False)
        one[v] = True
        out.append(one)
    return out
