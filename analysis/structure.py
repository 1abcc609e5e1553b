"""Structural reduction of the token system: structured fragments collapse without a search.

Three rules, applied to a fixpoint; each keeps the soundness verdict of the system:

* **substitution** (sequences, exclusive and inclusive blocks) — a node that does not route to
  itself is inlined into every outcome that sends a token to it: a token arriving there may
  as well choose its own outcome at once (its choice is local). A chain collapses into its
  first step; the branches of a block into the split.
* **self-loops** (bounded loops) — an outcome that only puts the token back where it was
  changes nothing and is dropped, provided another outcome exists; when only failures remain,
  the loop has no exit: a *trap*, reported with the loop's path.
* **joins** — an outcome that puts a token on every branch place of an AND-join, when no other
  outcome produces on those places, fires the join at once (a fork-join block).

What does not reduce (unstructured joins, loops through forks, a decision too large to inline)
is left for the explicit search (`statespace.py`). Dead tokens are pushed through steps
eagerly: their path is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations_with_replacement

from noetlc.analysis.model import (
    CONTINUE,
    DEAD,
    EMPTY,
    LIVE,
    TRAPPED,
    Marking,
    Outcome,
    OutcomeKey,
    Path,
    System,
    add,
    freeze,
)

MAX_OUTCOMES = 256


@dataclass(frozen=True, slots=True)
class Trap:
    step: str
    loop: Path  # the outcome that loops back


@dataclass
class Reduction:
    traps: list[Trap] = field(default_factory=list)
    substituted: int = 0
    joins_resolved: int = 0
    merge_checks: int = 0  # merges `_fold_merges` looked at (linear in the system's size)

    def trivial(self, system: System) -> bool:
        """Only the entry step remains and none of its outcomes leaves a token anywhere."""
        return list(system.outcomes) == [system.initial] and all(
            not o.prods for o in system.outcomes[system.initial]
        )


def growth(system: System) -> list[tuple[str, Path]]:
    """Forks on a cycle that no AND-join closes: each turn leaves one more token (NOE506).

    Checked before the reduction, which keeps completion and deadlocks but not token counts.
    Edges follow live tokens into step entries only: a token that waits at a join's branch
    place is synchronized there, so a cycle through the join is bounded."""
    succ: dict[int, set[int]] = {}
    for node, outcomes in system.outcomes.items():
        succ[node] = {s // 2 for o in outcomes for s, _ in o.prods if s % 2 == LIVE}
    found: list[tuple[str, Path]] = []
    for node, outcomes in system.outcomes.items():
        fork = next((o for o in outcomes if sum(c for s, c in o.prods if s % 2 == LIVE) >= 2), None)
        if fork is None:
            continue
        seen: set[int] = set()
        todo = [s // 2 for s, _ in fork.prods if s % 2 == LIVE]
        while todo:
            current = todo.pop()
            if current == node:
                found.append((system.step_of.get(node, "?"), fork.path))
                break
            if current in seen:
                continue
            seen.add(current)
            todo.extend(succ.get(current, ()))
    return found


def reduce(system: System, max_outcomes: int = MAX_OUTCOMES) -> Reduction:
    result = Reduction()
    _push_dead_tokens(system)
    index = _Producers(system)
    # each rule is a verdict-preserving rewrite, so stopping early only leaves more to search;
    # the bound keeps a rewrite that undoes another from running forever
    rounds = 2 * len(system.outcomes) + 8
    while True:
        rounds = _rounds(index, result, max_outcomes, rounds)
        # the dirty set follows a merge's producers and its holders one level deep: a last
        # look at every merge left catches what that misses (each fold reruns the rules)
        if not (rounds and system.counter and _fold_merges(index, result, every=True)):
            break
    prune(system)
    return result


def _rounds(index: _Producers, result: Reduction, max_outcomes: int, rounds: int) -> int:
    system = index.system
    changed = True
    while changed and rounds:
        changed = False
        rounds -= 1
        for node in sorted(system.outcomes, reverse=True):
            if node not in system.outcomes:
                continue
            if index.dirty and _fold_merges(index, result):
                changed = True
            if _self_loops(index, node, result):
                changed = True
            if _resolve_joins(index, node, result):
                changed = True
            if node != system.initial and _substitute(index, node, max_outcomes):
                result.substituted += 1
                changed = True
    return rounds


class _Producers:
    """Reverse index of the token system: slot -> the nodes whose outcomes put a token there,
    and place -> the nodes whose dead rule does. Every rule changes outcomes through `replace` and
    `remove`, so a rule asks its neighbours instead of scanning the whole system: the
    reduction stays linear in the size of the playbook. `dirty` holds the merges whose
    producers (or the feeders of their holders) changed since they were last looked at."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.by_slot: dict[int, set[int]] = {}
        self.slots_of: dict[int, set[int]] = {}
        self.dead_by_place: dict[int, set[int]] = {}
        # merges a dead token passing a place reaches (its dead rule), the other way round
        self.merges_of: dict[int, set[int]] = {}
        self.dirty: set[int] = set(system.counter)
        for node, outcomes in system.outcomes.items():
            self._link(node, {s for o in outcomes for s, _ in o.prods})
        for node, rule in system.dead_rules.items():
            for s, _ in rule:
                self.dead_by_place.setdefault(s // 2, set()).add(node)
                if s // 2 in system.counter:
                    self.merges_of.setdefault(node, set()).add(s // 2)

    def _link(self, node: int, slots: set[int]) -> None:
        old = self.slots_of.get(node, set())
        for s in old - slots:
            self.by_slot[s].discard(node)
        for s in slots - old:
            self.by_slot.setdefault(s, set()).add(node)
        self.slots_of[node] = slots
        counter = self.system.counter
        if counter:
            for s in old ^ slots:
                place = s // 2
                if place in counter:
                    self.dirty.add(place)
                # a holder of a merge (or the join its place is a branch of) gained or lost
                # a producer: the merge's `_fold_merges` condition may have changed
                self.dirty.update(self.merges_of.get(place, ()))
                join = self.system.branch_join.get(place)
                if join is not None:
                    self.dirty.update(self.merges_of.get(join, ()))

    def replace(self, node: int, outcomes: list[Outcome]) -> None:
        self._link(node, {s for o in outcomes for s, _ in o.prods})
        self.system.outcomes[node] = outcomes

    def remove(self, node: int) -> None:
        self._link(node, set())
        del self.slots_of[node]
        del self.system.outcomes[node]

    def producers(self, slot: int) -> set[int]:
        return self.by_slot.get(slot, _NOBODY)

    def dead_rule_feeds(self, place: int) -> bool:
        """A dead token passing a step still in the system can arrive at `place`: only if
        something can put one at that step's entry (dead tokens are pushed to where they end
        up before the rules run, so this is a dead cycle's token, or none)."""
        return any(self.by_slot.get(2 * n + DEAD) for n in self.dead_by_place.get(place, ()))


_NOBODY: set[int] = set()


# --------------------------------------------------------------------------- dead tokens


def _push_dead_tokens(system: System) -> None:
    """Replace a dead token at a step's entry by where it ends up (joins' branch places)."""
    done: dict[int, Marking] = {}

    def closure(node: int, visiting: set[int]) -> Marking:
        if node in done:
            return done[node]
        visiting.add(node)
        out: dict[int, int] = {}
        for slot, count in system.dead_rules.get(node, ()):
            place = slot // 2
            if (
                slot % 2 == DEAD
                and place in system.outcomes
                and place not in visiting
                and place not in system.counter  # a merge counts: `_fold_merges`
            ):
                for s, c in closure(place, visiting):
                    add(out, s, c * count)
            else:
                add(out, slot, count)
        visiting.discard(node)
        done[node] = freeze(out)
        return done[node]

    for node in list(system.dead_rules):
        system.dead_rules[node] = closure(node, set())
    for node, outcomes in system.outcomes.items():
        system.outcomes[node] = [_expand_dead(system, o) for o in outcomes]


def _expand_dead(system: System, o: Outcome) -> Outcome:
    # a step the reduction inlined keeps its dead rule (already closed over by
    # `_push_dead_tokens`): a dead token that reaches it later must still pass it, as the
    # search's `settle` lets it
    def passes(slot: int) -> bool:
        place = slot // 2
        return (
            slot % 2 == DEAD
            and (place in system.outcomes or place in system.dead_rules)
            and place not in system.counter
        )

    if not any(passes(s) for s, _ in o.prods):
        return o
    out: dict[int, int] = {}
    for slot, count in o.prods:
        place = slot // 2
        if passes(slot):
            for s, c in system.dead_rules.get(place, ()):
                add(out, s, c * count)
        else:
            add(out, slot, count)
    return Outcome(freeze(out), o.end, o.path, o.early)


def _dedupe(outcomes: list[Outcome]) -> list[Outcome]:
    best: dict[OutcomeKey, Outcome] = {}
    for o in outcomes:
        key = o.key()
        if key not in best or o.path.length < best[key].path.length:
            best[key] = o
    return list(best.values())


# --------------------------------------------------------------------------- merges


def _fold_merges(index: _Producers, result: Reduction, every: bool = False) -> bool:
    """A merge of k alternatives counts its dead arrivals (the control VM runs it on one live
    arrival, passes it dead when all k were dead). Once every outcome that reaches it brings a
    whole *activation* — k tokens, at most one live, as an exclusive block collapsed into its
    split does — the count is back to zero after each, so the outcome can say the result:
    one live token, or the merge's dead rule. When every producer is such, the merge counts
    nothing any more and is a plain step for the other rules.

    Only the merges in `index.dirty` are looked at (all of them with `every`): looking at
    every merge after every rewrite made the reduction quadratic (minutes at 10,000 steps)."""
    system = index.system
    todo = sorted(system.counter) if every else sorted(index.dirty & system.counter.keys())
    index.dirty.clear()
    changed = False
    for merge in todo:
        result.merge_checks += 1
        k = system.alternatives[merge]
        live, dead = 2 * merge + LIVE, 2 * merge + DEAD
        producers = index.producers(live) | index.producers(dead)
        # every step whose dead token reaches the merge, whether or not one can arrive there
        # now: a dead token also arrives through a join firing dead or a merge dying, which
        # no producer shows, and an inlined step still passes one (`statespace.settle`)
        holders = index.dead_by_place.get(merge, ())
        rules = (Outcome(system.dead_rules.get(n, ()), CONTINUE, EMPTY) for n in holders)
        if not _whole(rules, merge, k):
            continue
        if not _whole((o for n in producers for o in system.outcomes[n]), merge, k):
            continue
        folded = system.dead_rules.get(merge, ())
        for n, outcomes in _folded(system, producers, merge, k, folded).items():
            index.replace(n, outcomes)
        for n in list(index.dead_by_place.get(merge, ())):
            rule = system.dead_rules.get(n, ())
            if _count(Outcome(rule, CONTINUE, EMPTY), dead) == k:
                system.dead_rules[n] = _fold(rule, live, dead, k, folded)
                index.dead_by_place[merge].discard(n)
                for s, _ in folded:
                    index.dead_by_place.setdefault(s // 2, set()).add(n)
                    if s // 2 in system.counter:
                        index.merges_of.setdefault(n, set()).add(s // 2)
        del system.counter[merge]
        index.dirty.discard(merge)
        changed = True
    return changed


def _folded(
    system: System, producers: set[int], merge: int, k: int, rule: Marking
) -> dict[int, list[Outcome]]:
    live, dead = 2 * merge + LIVE, 2 * merge + DEAD
    out: dict[int, list[Outcome]] = {}
    for n in producers:
        outcomes = []
        for o in system.outcomes[n]:
            prods = _fold(o.prods, live, dead, k, rule)
            if prods is o.prods:
                outcomes.append(o)
                continue
            # the activation's result arrives when its tokens did: in their phase
            outcomes.append(_expand_dead(system, Outcome(prods, o.end, o.path, o.early)))
        out[n] = _dedupe(outcomes)
    return out


def _whole(outcomes: Iterable[Outcome], merge: int, k: int) -> bool:
    """Every outcome brings no token to the merge, or a whole activation (see above) whose
    dead tokens arrive first: live first, the count would be left at k - 1 (the control VM
    then passes the merge dead on the next dead arrival)."""
    live, dead = 2 * merge + LIVE, 2 * merge + DEAD
    for o in outcomes:
        counts = dict(o.prods)
        lv, dd = counts.get(live, 0), counts.get(dead, 0)
        if lv > 1 or lv + dd not in (0, k) or (lv and dd and not o.early):
            return False
    return True


def _fold(prods: Marking, live: int, dead: int, k: int, rule: Marking) -> Marking:
    counts = dict(prods)
    lv, dd = counts.get(live, 0), counts.get(dead, 0)
    if lv + dd != k:
        return prods
    counts.pop(dead, None)
    if not lv:
        for s, c in rule:
            add(counts, s, c)
    return freeze(counts)


# --------------------------------------------------------------------------- rules


def _self_loops(index: _Producers, node: int, result: Reduction) -> bool:
    system = index.system
    outcomes = system.outcomes[node]
    me = ((2 * node + LIVE, 1),)
    loops = [o for o in outcomes if o.prods == me and o.end == CONTINUE]
    if not loops:
        return False
    rest = [o for o in outcomes if not (o.prods == me and o.end == CONTINUE)]
    if rest and all(o.end != CONTINUE for o in rest) and any(o.end != TRAPPED for o in rest):
        # no way out but failure: report the loop once, then stop looking at it
        result.traps.append(Trap(system.step_of.get(node, "?"), loops[0].path))
        rest = [Outcome((), TRAPPED, loops[0].path)]
    if not rest:
        return False  # nothing but the loop: the explicit search shows it
    index.replace(node, rest)
    return True


def _substitute(index: _Producers, node: int, max_outcomes: int) -> bool:
    system = index.system
    mine = system.outcomes[node]
    live = 2 * node + LIVE
    if any(s // 2 == node for o in mine for s, _ in o.prods):
        return False  # it routes to itself (a loop through other steps)
    if node in system.joins and _join_pending(index, node):
        return False  # a join can still put a token here
    referrers = sorted(n for n in index.producers(live) if n != node)
    if not referrers:
        return False
    if len(referrers) > 1 and any(_opens_block(system, o) for o in mine):
        # a fork, or a branch on its way to a join: copied into several nodes (a loop's entry
        # and its back arc), the join would get several producers and never resolve; wait
        # until the block has collapsed here
        return False
    if index.producers(2 * node + DEAD) or node in system.counter:
        # a dead token still waits to pass through (a dead cycle), or may arrive at a merge
        # that counts them (a join upstream firing dead): inlined, it would never pass
        return False
    replaced: dict[int, list[Outcome]] = {}
    for n in referrers:
        new: list[Outcome] = []
        for o in system.outcomes[n]:
            c = _count(o, live)
            if not c:
                new.append(o)
                continue
            for combo in combinations_with_replacement(mine, c):
                composed = _compose(system, o, live, c, combo)
                if composed is None or len(new) >= max_outcomes:
                    return False
                new.append(composed)
        replaced[n] = _dedupe(new)
    for n, outcomes in replaced.items():
        index.replace(n, outcomes)
    index.remove(node)
    return True


def _opens_block(system: System, o: Outcome) -> bool:
    return sum(c for _, c in o.prods) > 1 or any(s // 2 in system.branch_join for s, _ in o.prods)


def _join_pending(index: _Producers, node: int) -> bool:
    return any(
        index.producers(2 * b + LIVE) or index.producers(2 * b + DEAD) or index.dead_rule_feeds(b)
        for b in index.system.joins[node].branches
    )


def prune(system: System) -> None:
    """Drop the nodes no token can reach any more (inlined everywhere they were used)."""
    seen = {system.initial}
    todo = [system.initial]
    while todo:
        node = todo.pop()
        slots = [s for o in system.outcomes.get(node, ()) for s, _ in o.prods]
        slots += [s for s, _ in system.dead_rules.get(node, ())]
        for s in slots:
            place = s // 2
            nxt = system.branch_join.get(place, place)
            for candidate in (place, nxt):
                if candidate in system.outcomes and candidate not in seen:
                    seen.add(candidate)
                    todo.append(candidate)
    for node in [n for n in system.outcomes if n not in seen]:
        del system.outcomes[node]


def _count(o: Outcome, slot: int) -> int:
    for s, c in o.prods:
        if s == slot:
            return c
    return 0


def _compose(
    system: System, o: Outcome, slot: int, count: int, parts: tuple[Outcome, ...]
) -> Outcome | None:
    """`o` with its `count` tokens at `slot` each taking one of `parts` (after `o`'s own
    tokens arrived); None when the order of the result's arrivals is more than an outcome
    can say (see `_early`)."""
    end = max([o.end, *(p.end for p in parts)])
    path = o.path
    for p in parts:
        path = path + p.path
    if end != CONTINUE:
        return Outcome((), end, path)
    out = dict(o.prods)
    out[slot] -= count
    for p in parts:
        for s, c in p.prods:
            add(out, s, c)
    letters = _letters(system, o, slot)
    relevant = [x for x in (_letters(system, p) for p in parts) if x]
    if len(relevant) > 1:
        # several tokens take their outcomes in any order: fine while they all do alike
        if len(set("".join(relevant))) > 1:
            return None
        relevant = [relevant[0][0]]
    early = _early(letters + "".join(relevant))
    if early is None:
        return None
    return Outcome(freeze(out), CONTINUE, path, early)


def _letters(system: System, o: Outcome, skip: int = -1) -> str:
    """The order in which `o`'s tokens whose order matters arrive: "L" live, "D" dead.
    Dead ones always matter (they count at merges, fire joins); live ones at a merge that
    counts (they reset it) or at a join's branch (the older token goes first). Any other
    live token waits for its step to move: it commutes with the rest."""
    live = any(
        s % 2 == LIVE and s != skip and (s // 2 in system.counter or s // 2 in system.branch_join)
        for s, _ in o.prods
    )
    dead = any(s % 2 == DEAD for s, _ in o.prods)
    phases = ("D" if dead else "") + ("L" if live else "")
    return phases if o.early else phases[::-1]


def _early(letters: str) -> bool | None:
    """Whether arrivals in this order are an outcome whose dead tokens come first (True) or
    its live ones (False); None past one change of colour."""
    runs = "".join(x for i, x in enumerate(letters) if i == 0 or letters[i - 1] != x)
    if len(runs) > 2:
        return None
    return runs == "DL"


def _resolve_joins(index: _Producers, node: int, result: Reduction) -> bool:
    system = index.system
    changed = False
    for join in _joins_fed_by(system, node):
        rule = system.joins[join]
        slots = [2 * b + color for b in rule.branches for color in (LIVE, DEAD)]
        if any(n != node for s in slots for n in index.producers(s)) or any(
            index.dead_rule_feeds(b) for b in rule.branches
        ):
            continue
        new: list[Outcome] = []
        ok = True
        for o in system.outcomes[node]:
            prods = dict(o.prods)
            present = [
                (prods.get(2 * b + LIVE, 0), prods.get(2 * b + DEAD, 0)) for b in rule.branches
            ]
            if not any(lv or dd for lv, dd in present):
                new.append(o)
                continue
            if not all(lv + dd == 1 for lv, dd in present):
                ok = False  # a branch missing, or both colors: order would matter
                break
            any_live = False
            for b, (lv, _) in zip(rule.branches, present, strict=True):
                slot = 2 * b + (LIVE if lv else DEAD)
                prods[slot] -= 1
                any_live = any_live or bool(lv)
            out_slot = 2 * rule.target + (LIVE if any_live else DEAD)
            add(prods, out_slot)
            fired = Outcome(freeze(prods), o.end, o.path + rule.path, o.early)
            fired = _expand_dead(system, fired) if not any_live else fired
            # the join fires on the last token it takes; a live output fired by a dead token
            # that came after the outcome's live ones is out of order where order matters
            late_dead = not o.early and any(dd for _, dd in present)
            if any_live and late_dead and _letters(system, Outcome(((out_slot, 1),), 0, EMPTY)):
                ok = False
                break
            if any(s // 2 in rule.branches for s, _ in fired.prods):
                # the dead token the join sends comes back to its branches (a dead cycle):
                # resolving again would never end; the search settles it (`statespace.settle`)
                ok = False
                break
            new.append(fired)
        if ok:
            index.replace(node, _dedupe(new))
            result.joins_resolved += 1
            changed = True
    return changed


def _joins_fed_by(system: System, node: int) -> list[int]:
    found: list[int] = []
    for o in system.outcomes[node]:
        for s, _ in o.prods:
            join = system.branch_join.get(s // 2)
            if join is not None and join not in found:
                found.append(join)
    return found


__all__ = ["EMPTY", "Reduction", "Trap", "reduce"]
