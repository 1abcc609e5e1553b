"""Pass `net`: the canonical tree -> the colored Petri net (`ir/net.py`).

Every step lowers to a fragment (ir/README.md has the table): admission, the pipeline's
dispatch and completion, loops with a bounded slot place, routing (exclusive arcs negate every
earlier arc's guard, by rank into the decision's guard list; inclusive arcs fork), AND-joins with dead-path
elimination, listener steps, final steps and the execution's sink. The effective guard of each
arc: no `when` = succeeded; a `when` that does not mention `event` =
succeeded and the guard; a `when` that mentions `event` fires on the events it names.
"""

from __future__ import annotations

from noetlc.compiler import tree
from noetlc.compiler.unit import CompilationUnit
from noetlc.compiler.values import ValuePool
from noetlc.diagnostics.report import Span
from noetlc.expr.compile import ExpressionPool
from noetlc.ir.cycles import back_edges
from noetlc.ir.events import BOUNDARY_NAMES, LOOP_DONE, STEP_DONE, STEP_FAILED, EventName
from noetlc.ir.net import (
    Decision,
    Guard,
    Join,
    Net,
    Place,
    PlaceKind,
    Position,
    Transition,
    TransitionKind,
)


def run(unit: CompilationUnit) -> None:
    playbook = unit.playbook
    pool = unit.pool
    if playbook is None or pool is None:
        return
    values = ValuePool(pool)
    builder = NetBuilder(playbook, pool, values)
    unit.net = builder.build()
    unit.values = values


class NetBuilder:
    def __init__(self, playbook: tree.Playbook, pool: ExpressionPool, values: ValuePool) -> None:
        self.playbook = playbook
        self.pool = pool
        self.values = values
        self.places: list[Place] = []
        self.transitions: list[Transition] = []
        self.steps = {s.name: s for s in playbook.workflow}
        self.joins, self.on_join_paths = _fork_analysis(playbook)
        self.step_index = {s.name: i for i, s in enumerate(playbook.workflow)}
        # each decision place's guards in order; a transition negates a prefix by its length
        self.decision_guards: dict[str, list[int]] = {}

    # ------------------------------------------------------------------ helpers

    def pos(self, span: Span, path: str) -> Position:
        return Position(span.file, span.line, span.column, path)

    def place(
        self,
        pid: str,
        kind: PlaceKind,
        step: str | None,
        span: Span,
        path: str,
        capacity: int | None = None,
    ) -> str:
        self.places.append(Place(pid, kind, step, capacity, self.pos(span, path)))
        return pid

    def trans(
        self,
        tid: str,
        kind: TransitionKind,
        step: str | None,
        consume: tuple[str, ...],
        produce: tuple[str, ...],
        span: Span,
        path: str,
        **extra: object,
    ) -> None:
        self.transitions.append(
            Transition(tid, kind, step, consume, produce, pos=self.pos(span, path), **extra)  # type: ignore[arg-type]
        )

    def entry_of(self, source: str, target: str) -> str:
        """Where a token from `source` to `target` goes: the join branch, or the entry."""
        join = self.joins.get(target)
        if join is not None and join.kind != "each" and source in join.branches:
            return f"{target}.from.{source}"
        return f"{target}.entry"

    # ------------------------------------------------------------------ build

    def build(self) -> Net:
        sink = self.place("execution.sink", "sink", None, self.playbook.span, "")
        failure = self.place("execution.failure", "failure", None, self.playbook.span, "")
        for index, step in enumerate(self.playbook.workflow):
            self.step(index, step, sink, failure)
        for join in self.joins.values():
            self.join(join)
        return Net(
            name=self.playbook.metadata.name,
            entry_step=self.playbook.entry,
            places=tuple(self.places),
            transitions=tuple(self.transitions),
            joins=tuple(self.joins[name] for name in sorted(self.joins)),
            decisions=self.decisions(),
        )

    def decisions(self) -> tuple[Decision, ...]:
        """The decision tables, each cut to the longest prefix a transition negates."""
        used: dict[str, int] = {}
        for t in self.transitions:
            if t.guard.earlier:
                place = t.consume[0]
                used[place] = max(used.get(place, 0), t.guard.earlier)
        return tuple(
            Decision(place, tuple(self.decision_guards[place][:count]))
            for place, count in used.items()
        )

    def step(self, index: int, step: tree.Step, sink: str, failure: str) -> None:
        name, span, path = step.name, step.span, f"workflow[{index}]"
        entry = self.place(f"{name}.entry", "entry", name, span, path)
        running = self.place(f"{name}.running", "running", name, span, path)
        done = self.place(f"{name}.done", "done", name, span, path)
        failed = self.place(f"{name}.failed", "failed", name, span, path)
        # admission
        if step.admit is None:
            self.trans(f"{name}.start", "start", name, (entry,), (running,), span, path)
        else:
            skipped = self.place(
                f"{name}.skipped", "skipped", name, step.admit.span, f"{path}.spec.policy.admit"
            )
            earlier = self.decision_guards.setdefault(entry, [])
            for i, rule in enumerate(step.admit.rules):
                expr = self.pool.by_path.get(("workflow", name, "admit", i)) if rule.when else None
                guard = Guard(expr, earlier=len(earlier))
                kind: TransitionKind = "admit" if rule.allow else "skip"
                writes = (
                    self.values.add(rule.set_ctx, ("workflow", name, "admit", i, "set_ctx"))
                    if rule.set_ctx is not None and rule.allow
                    else None
                )
                self.trans(
                    f"{name}.{kind}#{i}",
                    kind,
                    name,
                    (entry,),
                    (running if rule.allow else skipped,),
                    rule.span,
                    f"{path}.spec.policy.admit.rules[{i}]",
                    guard=guard,
                    writes=writes,
                )
                if expr is not None:
                    earlier.append(expr)
                if rule.when is None:
                    break
            else:
                # no rule matched: allowed (an omitted policy allows too)
                self.trans(
                    f"{name}.admit#default",
                    "admit",
                    name,
                    (entry,),
                    (running,),
                    step.admit.span,
                    f"{path}.spec.policy.admit",
                    guard=Guard(None, earlier=len(earlier)),
                )
            # a skipped step kills its outgoing paths (dead-path elimination)
            targets = tuple(dict.fromkeys(a.step for a in step.next.arcs)) if step.next else ()
            self.trans(
                f"{name}.skipped.end",
                "end",
                name,
                (skipped,),
                tuple(self.entry_of(name, t) for t in targets if self._needs_dead(name, t))
                or (sink,),
                span,
                path,
                events=(EventName.STEP_SKIPPED.value,),
            )
        # the pipeline (or the loop around it)
        if step.loop is None:
            self.trans(
                f"{name}.complete",
                "complete",
                name,
                (running,),
                (done,),
                span,
                path,
                events=(STEP_DONE,),
            )
            self.trans(
                f"{name}.fail",
                "fail",
                name,
                (running,),
                (failed,),
                span,
                path,
                events=(STEP_FAILED,),
            )
        else:
            loop, lpath = step.loop, f"{path}.loop"
            slots = self.place(
                f"{name}.slots",
                "slots",
                name,
                loop.span,
                lpath,
                capacity=loop.max_in_flight if loop.mode == "parallel" else 1,
            )
            pending = self.place(f"{name}.pending", "pending", name, loop.span, lpath)
            iterating = self.place(f"{name}.iterating", "iterating", name, loop.span, lpath)
            self.trans(
                f"{name}.loop_start",
                "loop_start",
                name,
                (running,),
                (pending,),
                loop.span,
                lpath,
                events=(EventName.LOOP_STARTED.value,),
            )
            self.trans(
                f"{name}.iter_start",
                "iter_start",
                name,
                (pending, slots),
                (iterating,),
                loop.span,
                lpath,
                events=(EventName.LOOP_ITERATION_STARTED.value,),
            )
            self.trans(
                f"{name}.iter_end",
                "iter_end",
                name,
                (iterating,),
                (slots,),
                loop.span,
                lpath,
                events=(EventName.LOOP_ITERATION_DONE.value, EventName.LOOP_ITERATION_FAILED.value),
            )
            self.trans(
                f"{name}.loop_done",
                "loop_done",
                name,
                (slots,),
                (done,),
                loop.span,
                lpath,
                events=(LOOP_DONE,),
            )
            self.trans(
                f"{name}.loop_failed",
                "fail",
                name,
                (slots,),
                (failed,),
                loop.span,
                lpath,
                events=(STEP_FAILED,),
            )
        # routing
        boundary = done
        if step.listener is not None:
            boundary = self.place(
                f"{name}.waiting", "waiting", name, step.listener.span, f"{path}.eval_mode"
            )
            self.trans(
                f"{name}.listen",
                "start",
                name,
                (done,),
                (boundary,),
                step.listener.span,
                f"{path}.eval_mode",
                events=(STEP_DONE,),
            )
        self.route(step, path, boundary, failed, sink, failure)

    def route(
        self, step: tree.Step, path: str, done: str, failed: str, sink: str, failure: str
    ) -> None:
        name = step.name
        done_event = LOOP_DONE if step.loop is not None else STEP_DONE
        listener = step.listener is not None
        router = step.next
        exclusive = router is not None and router.mode == "exclusive"
        # The decision of each source: the guards of the stopping arcs (every arc of an
        # exclusive router, the `stop` arcs of an inclusive one) in order, then the others (only
        # "no arc matched" negates those). An arc negates the stopping arcs before it by rank.
        stops: dict[str, list[int]] = {done: [], failed: []}
        others: dict[str, list[int]] = {done: [], failed: []}
        always: set[str] = set()  # sources with an unconditional arc: "no arc matched" never
        stopped: set[str] = set()  # an unconditional stopping arc: nothing after it fires
        for i, arc in enumerate(router.arcs if router else ()):
            apath = f"{path}.next.arcs[{i}]"
            expr = (
                self.pool.by_path.get(("workflow", name, "next", i, "when")) if arc.when else None
            )
            events = self.arc_events(arc, expr, done_event, listener)
            args = (
                self.values.add(arc.args, ("workflow", name, "next", i, "args"))
                if arc.args is not None
                else None
            )
            writes = (
                self.values.add(arc.set_ctx, ("workflow", name, "next", i, "set_ctx"))
                if arc.set_ctx is not None
                else None
            )
            target_place = self.entry_of(name, arc.step)
            stops_later = exclusive or arc.stop
            for source, evs in (
                (done, tuple(e for e in events if e != STEP_FAILED)),
                (failed, tuple(e for e in events if e == STEP_FAILED)),
            ):
                if not evs:
                    continue
                suffix = "" if source == done else ".failed"
                if source in stopped:
                    continue  # shadowed by an earlier unconditional arc (the linter reports it)
                guard = Guard(expr, earlier=len(stops[source]))
                self.trans(
                    f"{name}->{arc.step}#{i}{suffix}",
                    "route",
                    name,
                    (source,),
                    (target_place,),
                    arc.span,
                    apath,
                    guard=guard,
                    events=evs,
                    args=args,
                    writes=writes,
                    target=arc.step,
                )
                if self._needs_dead(name, arc.step) and source == done:
                    for k, dead in enumerate(self.not_taken(expr, stops[source], exclusive)):
                        self.trans(
                            f"{name}->{arc.step}#{i}.dead" + (f".{k}" if k else ""),
                            "dead",
                            name,
                            (source,),
                            (target_place,),
                            arc.span,
                            apath,
                            guard=dead,
                            events=evs,
                            target=arc.step,
                        )
                if expr is None:
                    # an unconditional arc always fires: the "nothing matched" transition (and
                    # any arc after a stopping one) can never fire on these events
                    always.add(source)
                    if stops_later:
                        stopped.add(source)
                elif stops_later:
                    stops[source].append(expr)
                elif source not in always:  # (after an unconditional arc nothing negates it)
                    others[source].append(expr)
        earlier = {source: self.decision_guards.setdefault(source, []) for source in (done, failed)}
        for source in (done, failed):
            earlier[source].extend(stops[source] + others[source])
        # no arc matched: the token ends (success) or the execution fails (failure)
        if done not in always:
            self.trans(
                f"{name}.end",
                "end",
                name,
                (done,),
                (sink,),
                step.span,
                path,
                guard=Guard(None, earlier=len(earlier[done])),
                events=(done_event,),
            )
        if failed not in always:
            self.trans(
                f"{name}.unhandled",
                "unhandled",
                name,
                (failed,),
                (failure,),
                step.span,
                path,
                guard=Guard(None, earlier=len(earlier[failed])),
                events=(STEP_FAILED,),
            )

    @staticmethod
    def not_taken(expr: int | None, stops: list[int], exclusive: bool) -> list[Guard]:
        """Disjoint guards whose union is "the arc did not fire" (its dead transitions). An
        inclusive arc after stopping arcs is also not taken when one of them fired: the first
        whose guard held, one guard each (O(earlier), only for arcs on a join's paths). An
        exclusive arc keeps the single `not expr`."""
        shadowing = 0 if exclusive else len(stops)
        own = [Guard(None, (expr,), earlier=shadowing)] if expr is not None else []
        return own + [Guard(stops[rank], earlier=rank) for rank in range(shadowing)]

    def arc_events(
        self, arc: tree.Arc, expr: int | None, done_event: str, listener: bool
    ) -> tuple[str, ...]:
        if listener:
            return (EventName.SIGNAL_RECEIVED.value, EventName.TIMER_FIRED.value)
        if expr is None:
            return (done_event,)
        compiled = self.pool.entries[expr]
        if not compiled.mentions_event:
            return (done_event,)
        named = tuple(e for e in compiled.event_names if e in BOUNDARY_NAMES)
        return named or (done_event, STEP_FAILED)

    def _needs_dead(self, source: str, target: str) -> bool:
        join = self.joins.get(target)
        if join is not None and join.kind == "all" and source in join.branches:
            return True
        return target in self.on_join_paths

    def join(self, join: Join) -> None:
        step = self.steps[join.step]
        path = f"workflow[{self.step_index[join.step]}]"
        if join.kind == "each":
            return
        for source in join.branches:
            self.place(f"{join.step}.from.{source}", "branch", join.step, step.span, path)
        self.trans(
            f"{join.step}.join",
            "join",
            join.step,
            tuple(f"{join.step}.from.{s}" for s in join.branches),
            (f"{join.step}.entry",),
            step.span,
            path,
            events=(EventName.JOIN_FIRED.value,),
            target=join.step,
        )


def infer_joins(playbook: tree.Playbook) -> dict[str, Join]:
    """AND-joins: steps with ≥2 incoming arcs whose sources descend from different branches of
    one inclusive fork. `spec.join` overrides the inferred kind."""
    joins, _ = _fork_analysis(playbook)
    return joins


def _graph(playbook: tree.Playbook) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    preds: dict[str, list[str]] = {}
    succ: dict[str, list[str]] = {}
    for step in playbook.workflow:
        for arc in step.next.arcs if step.next else ():
            sources = preds.setdefault(arc.step, [])
            if step.name not in sources:
                sources.append(step.name)
            succ.setdefault(step.name, []).append(arc.step)
    return preds, succ


def _fork_analysis(playbook: tree.Playbook) -> tuple[dict[str, Join], set[str]]:
    """Label propagation from every inclusive fork: each step reached gets the set of the
    fork's branches that reach it. A step whose incoming steps carry different branches is an
    AND-join of that fork; propagation stops at a join every branch reached (its output token
    no longer belongs to the fork), which keeps the analysis linear for structured workflows.
    Returns the joins and the steps on some fork-to-join path (dead tokens must pass them)."""
    preds, succ = _graph(playbook)
    back = back_edges((playbook.entry,), succ)
    # a cycle's back edge is not an incoming branch: a loop head is not a join
    preds = {n: [s for s in ss if (s, n) not in back] for n, ss in preds.items()}
    joins: dict[str, Join] = {}
    on_paths: set[str] = set()
    for step in playbook.workflow:
        sources = preds.get(step.name, [])
        if step.join is not None and len(sources) >= 2:
            joins[step.name] = Join(step.name, step.join, None, tuple(sources))
    for fork in playbook.workflow:
        if fork.next is None or fork.next.mode != "inclusive" or len(fork.next.arcs) < 2:
            continue
        labels: dict[str, set[int]] = {}
        everything = set(range(len(fork.next.arcs)))
        todo: list[tuple[str, int]] = [(arc.step, i) for i, arc in enumerate(fork.next.arcs)]
        held: set[str] = set()  # merge points not expanded yet (they may collect every branch)
        expanded: set[str] = set()
        while True:
            while todo:
                node, label = todo.pop()
                if node == fork.name:
                    continue
                seen = labels.setdefault(node, set())
                if label in seen:
                    continue
                seen.add(label)
                if len(preds.get(node, [])) >= 2 and node not in expanded:
                    held.add(node)
                    continue
                todo.extend((nxt, label) for nxt in succ.get(node, []))
            # A merge point every branch reached is where the fork's tokens end; one reached by
            # only some branches lets them pass on.
            partial = sorted(n for n in held if labels[n] != everything)
            if not partial:
                break
            for node in partial:
                held.discard(node)
                expanded.add(node)
                todo.extend((nxt, label) for nxt in succ.get(node, []) for label in labels[node])
        found = False
        for node in labels:
            sources = preds.get(node, [])
            if len(sources) < 2 or node in joins:
                continue
            branch_of = [
                labels.get(s, set()) | ({-1} if s == fork.name else set()) for s in sources
            ]
            distinct = {min(b) for b in branch_of if b}
            if len(distinct) >= 2:
                # only the fork's branches are joined; other incoming arcs (alternative
                # paths that do not descend from this fork) stay plain merges into the entry
                branches = tuple(s for s in sources if labels.get(s) or s == fork.name)
                joins[node] = Join(node, "all", fork.name, branches)
                found = True
        if found:
            on_paths.update(n for n in labels if n not in joins)
    return joins, on_paths
