"""Explicit state-space search of what the structural reduction left, with stubborn sets.

A state is a marking of the token system. Moves: a live token at a node takes one of the
node's outcomes, a dead token passes the node, a join fires when every branch place holds a
token. Failures end the execution (a terminal that is fine: the playbook chose not to handle
them); the execution *completes* when no move is left and no live token waits at a join.

Partial-order reduction: the moves of the token at one node form a stubborn set — nothing
else consumes that token and more tokens elsewhere never disable them, so they commute with
every other move (Valmari's D1/D2), and deadlocks and completions stay reachable from every
state explored. A state is expanded in full when the reduced choice would close a cycle on
the search stack (the cycle proviso) or only leads to failures. A wide fork of k branches then
costs O(k) states instead of 2^k.

Violations: a terminal state with a live token at a join (deadlock), a state from which no
completion is reachable and no deadlock either (a trap: a cycle with no exit), and a state
that strictly covers one of its ancestors on the stack (tokens grow without bound).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from itertools import product
from typing import Literal

from noetlc.analysis.model import (
    CONTINUE,
    DEAD,
    EMPTY,
    LIVE,
    Marking,
    Path,
    System,
    add,
    freeze,
)

ENDED = -1  # the execution failed (or ran into an already reported trap)
COVER_DEPTH = 2_000  # ancestors compared when a move adds tokens
PER_PLACE = 2  # tokens on one place past which a growing state is not expanded
SETTLE_TURNS = 256  # rounds of dead tokens passing steps before a dead cycle is cut


@dataclass(frozen=True, slots=True)
class Violation:
    kind: Literal["deadlock", "trap", "unbounded"]
    path: Path
    marking: Marking


@dataclass
class Search:
    states: int = 0
    complete: bool = True
    violations: list[Violation] = field(default_factory=list)
    max_tokens: int = 0
    moves: list[Path] = field(default_factory=list)  # the paths of every explored move


Move = tuple[int, Path]  # successor state id (or ENDED), the path of the move


class _Explorer:
    def __init__(self, system: System, budget: int, por: bool) -> None:
        self.system = system
        self.budget = budget
        self.por = por
        self.ids: dict[Marking, int] = {}
        self.markings: list[Marking] = []
        self.succ: list[list[Move] | None] = []
        self.pruned: set[int] = set()
        self.result = Search()
        self.join_rank = {target: i for i, target in enumerate(system.joins)}
        self.grew = False
        self._plain: dict[int, tuple[dict[int, int], int]] = {}  # `_covers`, by state id
        # places that count (a merge's dead arrivals, an `any` join's has-run flag): bounded
        # by construction, so they never make a state grow
        self.counting = {
            2 * p + DEAD for p in (*system.counter.values(), *system.ran_flag.values())
        }

    # ------------------------------------------------------------------ moves

    def moves(self, m: Marking, reduced: bool) -> list[tuple[Marking | None, Path]]:
        system = self.system
        out: list[tuple[Marking | None, Path]] = []
        counts = dict(m)
        for slot, _ in m:
            node = slot // 2
            if node not in system.outcomes:
                continue
            base = dict(counts)
            base[slot] -= 1
            if slot % 2 == LIVE:
                for o in system.outcomes[node]:
                    if o.end != CONTINUE:
                        out.append((None, o.path))
                        continue
                    new = dict(base)
                    path = o.path
                    if o.early:  # its dead tokens settle before its live ones arrive
                        for s, c in o.prods:
                            if s % 2 == DEAD:
                                add(new, s, c)
                        settled, path = self.settle(new, path)
                        new = dict(settled)
                    for s, c in o.prods:
                        if s % 2 == LIVE or not o.early:
                            add(new, s, c)
                        if s % 2 == LIVE and s // 2 in system.counter:
                            new.pop(2 * system.counter[s // 2] + DEAD, None)  # a live arrival
                    out.append(self.settle(new, path))
            else:
                new = dict(base)
                for s, c in system.dead_rules.get(node, ()):
                    add(new, s, c)
                out.append(self.settle(new, Path()))
            if reduced:
                return out
        # only joins with a token on some branch can fire: look at those, in a fixed order
        branch_join = system.branch_join
        fed = {branch_join[s // 2] for s, _ in m if s // 2 in branch_join}
        for target in sorted(fed, key=self.join_rank.__getitem__):
            rule = system.joins[target]
            options = []
            for b in rule.branches:
                colors = [c for c in (LIVE, DEAD) if counts.get(2 * b + c)]
                if not colors:
                    break
                options.append([2 * b + c for c in colors])
            else:
                for chosen in product(*options):
                    new = dict(counts)
                    for s in chosen:
                        new[s] -= 1
                    live = any(s % 2 == LIVE for s in chosen)
                    add(new, 2 * target + (LIVE if live else DEAD))
                    if live and target in system.counter:
                        new.pop(2 * system.counter[target] + DEAD, None)
                    out.append(self.settle(new, rule.path))
        return out

    def settle(self, marking: dict[int, int], path: Path) -> tuple[Marking, Path]:
        """Dead tokens pass steps at once and joins fire on the arrival that completes them
        (the control VM does both while settling), so no marking keeps a dead token at a
        step's entry; a dead cycle is cut after a while. `path` grows by the joins fired."""
        system = self.system
        rules = system.dead_rules
        # (a step the reduction inlined keeps its dead rule: a join upstream that fires
        # dead still sends a token there)
        pending = [s for s, c in marking.items() if c and s % 2 == DEAD and s // 2 in rules]
        seen: set[Marking] = set()
        for turn in range(SETTLE_TURNS):
            if turn >= 16 and pending:
                # dead tokens going round a cycle: cut as soon as the marking repeats
                frozen = freeze(marking)
                if frozen in seen:
                    break
                seen.add(frozen)
            if system.any_branch:
                self._let_through(marking)
            if not pending:
                fired = self._fire_joins(marking) if system.joins else EMPTY
                if not fired.length:
                    break
                path = path + fired
                pending = [s for s, c in marking.items() if c and s % 2 == DEAD and s // 2 in rules]
                continue
            # the dead tokens the last ones sent on, without a scan of the whole marking
            now, pending = pending, []
            for slot in now:
                count = marking.pop(slot, 0)
                if count:
                    node = slot // 2
                    self._count_dead(marking, node, count)
                    pending += [s for s, _ in rules.get(node, ()) if s // 2 in rules]
        return freeze(marking), path

    def _count_dead(self, marking: dict[int, int], node: int, count: int) -> None:
        """`count` dead tokens pass `node`; a merge dies when all its alternatives did
        (vm/admission.py `admit`), the rest are counted."""
        system = self.system
        counter = system.counter.get(node)
        if counter is not None:
            seen = marking.get(2 * counter + DEAD, 0) + count
            count, rest = divmod(seen, system.alternatives[node])
            marking[2 * counter + DEAD] = rest
        for s, c in system.dead_rules.get(node, ()):
            add(marking, s, c * count)

    def _fire_joins(self, marking: dict[int, int]) -> Path:
        """AND-joins fire as soon as every branch holds a token (vm/joins.py `arrive`, in the
        same step as the arrival): left for later, a join of dead tokens would let them
        overtake the live ones that follow. Where a branch holds both colours the VM takes
        the older one, which a marking does not know: that join is left to `moves`."""
        system = self.system
        branch_join = system.branch_join
        fed = {branch_join[s // 2] for s, c in marking.items() if c and s // 2 in branch_join}
        fired = EMPTY
        for target in fed:
            rule = system.joins[target]
            chosen = []
            for b in rule.branches:
                live, dead = marking.get(2 * b + LIVE, 0), marking.get(2 * b + DEAD, 0)
                if not (live or dead) or (live and dead):
                    break
                chosen.append(2 * b + (LIVE if live else DEAD))
            else:
                # as often as every branch holds a token, at once (a dead cycle can leave
                # many: one at a time, that took minutes)
                times = min(marking[s] for s in chosen)
                for s in chosen:
                    marking[s] -= times
                live_out = any(s % 2 == LIVE for s in chosen)
                add(marking, 2 * target + (LIVE if live_out else DEAD), times)
                if live_out and target in system.counter:
                    marking.pop(2 * system.counter[target] + DEAD, None)
                fired = fired + rule.path
        return fired

    def _let_through(self, marking: dict[int, int]) -> None:
        """Tokens at an `any` join's branches: the first live one enters the step (its
        has-run flag set), the others and every dead one are dropped (vm/joins.py)."""
        system = self.system
        for slot in [s for s, c in marking.items() if c and s // 2 in system.any_branch]:
            count = marking.pop(slot)
            target = system.any_branch[slot // 2]
            flag = 2 * system.ran_flag[target] + DEAD
            if slot % 2 == LIVE and count and not marking.get(flag):
                marking[flag] = 1
                add(marking, 2 * target + LIVE)
                if target in system.counter:
                    marking.pop(2 * system.counter[target] + DEAD, None)

    def state(self, m: Marking) -> tuple[int, bool]:
        known = self.ids.get(m)
        if known is not None:
            return known, False
        self.ids[m] = len(self.markings)
        self.markings.append(m)
        self.succ.append(None)
        self.result.max_tokens = max(self.result.max_tokens, sum(c for _, c in m))
        return self.ids[m], True

    # ------------------------------------------------------------------ search

    def run(self) -> Search:
        system = self.system
        init, _ = self.state(((2 * system.initial + LIVE, 1),))
        on_stack = {init}
        stack: list[tuple[int, int]] = [(init, 0)]  # (state, next successor index)
        self.expand(init, on_stack, stack)
        while stack:
            sid, i = stack[-1]
            succs = self.succ[sid] or []
            if i >= len(succs):
                stack.pop()
                on_stack.discard(sid)
                continue
            stack[-1] = (sid, i + 1)
            target = succs[i][0]
            if target == ENDED or target in on_stack or self.succ[target] is not None:
                continue
            if target in self.pruned:
                continue
            if len(self.markings) > self.budget:
                self.result.complete = False
                break
            stack.append((target, 0))
            on_stack.add(target)
            self.expand(target, on_stack, stack)
        self.result.states = len(self.markings)
        self.result.moves = [path for succs in self.succ if succs for _, path in succs]
        self.classify()
        return self.result

    def expand(self, sid: int, on_stack: set[int], stack: list[tuple[int, int]]) -> None:
        m = self.markings[sid]
        reduced = self.por
        raw = self.moves(m, reduced)
        if reduced and self._needs_full(raw, on_stack):
            raw = self.moves(m, False)
        counting = self.counting
        total = sum(c for s, c in m if s not in counting)
        succs: list[Move] = []
        for new, path in raw:
            if new is None:
                succs.append((ENDED, path))
                continue
            tid, fresh = self.state(new)
            succs.append((tid, path))
            if (
                fresh
                and sum(c for s, c in new if s not in counting) > total
                and self._covers(new, stack)
            ):
                if not self.grew:
                    self.grew = True
                    self.result.violations.append(Violation("unbounded", Path(), new))
                if max(c for _, c in new) > PER_PLACE:
                    # growth without bound: the search stops here, but only after a few turns,
                    # so what the growth leads to (a join left waiting) is still found
                    self.pruned.add(tid)
                    self.succ[tid] = []
        self.succ[sid] = succs

    def _needs_full(self, raw: list[tuple[Marking | None, Path]], on_stack: set[int]) -> bool:
        if all(new is None for new, _ in raw):
            return True  # only failures: other tokens must still be looked at
        return any(new is not None and self.ids.get(new) in on_stack for new, _ in raw)

    def _covers(self, new: Marking, stack: list[tuple[int, int]]) -> bool:
        """A state on the stack that `new` strictly covers. Each state's tokens (counting
        places left out) and their total are computed once (`_plain`); an ancestor with as
        many tokens or more is skipped on the total alone, before any place is compared."""
        big, total = self._tokens(new)
        plain = self._plain
        for sid, _ in reversed(stack[-COVER_DEPTH:]):
            entry = plain.get(sid)
            if entry is None:
                entry = plain[sid] = self._tokens(self.markings[sid])
            small, size = entry
            if size < total and all(big.get(s, 0) >= c for s, c in small.items()):
                return True
        return False

    def _tokens(self, m: Marking) -> tuple[dict[int, int], int]:
        counting = self.counting
        tokens = {s: c for s, c in m if s not in counting}
        return tokens, sum(tokens.values())

    # ------------------------------------------------------------------ verdicts

    def classify(self) -> None:
        n = len(self.markings)
        preds: list[list[int]] = [[] for _ in range(n)]
        good: list[int] = []
        deadlocks: list[int] = []
        for sid in range(n):
            succs = self.succ[sid]
            if succs is None or sid in self.pruned:
                good.append(sid)  # not expanded (budget) or cut: assume it can complete
                continue
            if not succs:
                if self._stuck(self.markings[sid]):
                    deadlocks.append(sid)
                else:
                    good.append(sid)
            for target, _ in succs:
                if target != ENDED:
                    preds[target].append(sid)
        completes = _backward(good, preds)
        reaches_deadlock = _backward(deadlocks, preds)
        parents = self._bfs()
        for sid in deadlocks:
            self.result.violations.append(
                Violation("deadlock", _path_to(sid, parents), self.markings[sid])
            )
        for sid in range(n):
            if completes[sid] or reaches_deadlock[sid] or sid not in parents:
                continue
            parent = parents[sid][0]
            if parent is not None and not (completes[parent] or reaches_deadlock[parent]):
                continue  # report where the trap is entered, not every state inside
            self.result.violations.append(
                Violation("trap", _path_to(sid, parents), self.markings[sid])
            )
        unbounded = [v for v in self.result.violations if v.kind == "unbounded"]
        if unbounded:
            first = self.ids[unbounded[0].marking]
            rest = [v for v in self.result.violations if v.kind != "unbounded"]
            self.result.violations = [
                Violation("unbounded", _path_to(first, parents), unbounded[0].marking),
                *rest,
            ]

    def _stuck(self, m: Marking) -> bool:
        return any(slot % 2 == LIVE for slot, _ in m)

    def _bfs(self) -> dict[int, tuple[int | None, Path]]:
        parents: dict[int, tuple[int | None, Path]] = {0: (None, Path())}
        queue = deque([0])
        while queue:
            sid = queue.popleft()
            for target, path in self.succ[sid] or []:
                if target != ENDED and target not in parents:
                    parents[target] = (sid, path)
                    queue.append(target)
        return parents


def _backward(seeds: list[int], preds: list[list[int]]) -> list[bool]:
    mark = [False] * len(preds)
    todo = list(seeds)
    for s in seeds:
        mark[s] = True
    while todo:
        s = todo.pop()
        for p in preds[s]:
            if not mark[p]:
                mark[p] = True
                todo.append(p)
    return mark


def _path_to(sid: int, parents: dict[int, tuple[int | None, Path]]) -> Path:
    parts: list[Path] = []
    node: int | None = sid
    while node is not None and node in parents:
        parent, path = parents[node]
        parts.append(path)
        node = parent
    out = Path()
    for p in reversed(parts):
        out = out + p
    return out


def explore(system: System, budget: int, *, por: bool = True) -> Search:
    return _Explorer(system, budget, por).run()
