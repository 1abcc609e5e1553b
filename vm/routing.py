"""The control VM's state and how a decided step moves tokens: the router of a step's
boundary event (`_route`), putting tokens on places and joins, ctx writes, the server
events it records. `ControlVM` (vm/control.py) builds on it with admission, loops, listeners
and the interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from typing import Any

from noetlc.expr.limits import MAX_SIZE, deep_size
from noetlc.ir.events import EventName
from noetlc.vm.control_state import StepRecord, StepRun, Token
from noetlc.vm.joins import JoinPlaces
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.loop_results import Spill
from noetlc.vm.protocol import Event, Source
from noetlc.vm.tables import DecodedTransition, StepTable, clear_prefix

_EXECUTION_FAILED = EventName.EXECUTION_FAILED.value
_JOIN_FIRED = EventName.JOIN_FIRED.value
_STEP_FAILED = EventName.STEP_FAILED.value

_NEXT_SELECTED = EventName.NEXT_SELECTED.value
_SERVER = Source.SERVER.value
_new = tuple.__new__  # an Event without its Python-level __new__ (one per transition)
_NOTHING_LIVE: set[str] = set()  # a step that feeds no join tracks no live places (never added to)


class Routing(ABC):
    """The state `ControlVM.__init__` sets up, and the routing over it."""

    # the whole VM's slots: it holds more attributes than an instance dict shares keys for,
    # and the hot path reads them on every event
    __slots__ = (
        "_action_seed",
        "_events",
        "_hot",
        "_max_events",
        "_max_step_runs",
        "_on_done",
        "_stamp",
        "budgets",
        "ctx",
        "ctx_size",
        "ctx_sizes",
        "dead_arrivals",
        "error",
        "event_count",
        "execution_id",
        "final_result",
        "firings",
        "handled_failures",
        "inputs",
        "iterations",
        "join_places",
        "listeners",
        "program",
        "ready",
        "results",
        "runs",
        "scope",
        "spill",
        "status",
        "step_runs",
        "steps",
        "tables",
        "timers",
        "workload",
    )

    program: LoadedProgram
    tables: dict[str, StepTable]
    ctx: dict[str, Any]
    scope: dict[str, Any]
    steps: dict[str, StepRecord]
    execution_id: str
    _events: list[Any]  # the current answer's events (or compact records), in order
    _stamp: tuple[str, str]  # (event id prefix, execution id), shared by the records
    event_count: int
    join_places: JoinPlaces
    ready: deque[tuple[str, Token]]
    error: dict[str, Any] | None
    status: str
    firings: int
    handled_failures: int
    budgets: dict[str, int]
    ctx_size: int  # characters and items held in ctx (`expr.limits.deep_size`)
    ctx_sizes: dict[str, int]
    spill: Spill | None

    @abstractmethod
    def _over(self, name: str, count: int, limit: int) -> None:
        """A budget is exceeded: the execution fails (ControlVM)."""

    def record(
        self,
        name: str,
        step: str | None,
        payload: dict[str, Any],
        step_run_id: str | None = None,
        iteration: int | None = None,
    ) -> None:
        """Record a server event. The generated handlers (vm/specialise.py) record compact
        `protocol.ServerRecord`s instead, built into `Event`s when `Step.events` is read."""
        self.event_count = n = self.event_count + 1
        self._events.append(
            _new(
                Event,
                (
                    name,
                    _SERVER,
                    step,
                    step_run_id,
                    iteration,
                    payload,
                    f"{self._stamp[0]}{n}",
                    self.execution_id,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                ),
            )
        )  # `protocol.recorded`, inlined

    def _route(
        self,
        run: StepRun,
        table: StepTable,
        routes: tuple[DecodedTransition, ...],
        name: str,
        scope: dict[str, Any],
        error: dict[str, Any] | None,
    ) -> bool:
        """Fire every route (listening to `name`, in order) whose guard passes; True if a route
        fired. Exclusive arcs share a guard (`g`, then `not g`): each distinct guard is
        evaluated once, again only after a route wrote ctx — except the guards of a route that
        fired, which stay true: exclusive fires the first match even if its write changes ctx.

        Then dead-path elimination: every place on the way to an AND-join that this decision
        did not feed gets a dead token (arcs not taken, shadowed, or listening to the other
        outcome) — unless the token stays in a cycle, which will decide again."""
        step = run.step
        feeds = table.join_feeds
        fired_route = False
        live: set[str] = set() if feeds else _NOTHING_LIVE
        values: dict[Any, bool] = {}
        fired: set[Any] = set()  # guards of routes that fired: true for the whole decision
        # exclusive: the first `clear` guards of `decision` are known false (and not fired)
        # under `values`; each route checks only the earlier guards not checked yet
        decision: tuple[Any, ...] = ()
        clear = 0
        for transition in routes:
            for evaluate, negated in transition.guards:
                if negated and evaluate in fired:
                    break  # exclusive: an earlier arc matched (a ctx write cannot undo that)
                value = values.get(evaluate)
                if value is None:
                    value = values[evaluate] = bool(evaluate(scope))
                if value is negated:
                    break
            else:
                if transition.earlier:
                    if transition.decision is not decision:
                        decision, clear = transition.decision, 0
                    clear = clear_prefix(decision, clear, transition.earlier, fired, values, scope)
                    if clear < transition.earlier:
                        continue  # an earlier arc matched
                self.firings += 1
                kind = transition.kind
                if kind == "route":
                    fired_route = True
                    fired.update(e for e, negated in transition.guards if not negated)
                    if transition.args is None:
                        args = run.args
                    else:
                        args = self.program.value(transition.args, scope)
                    if not args and type(args) is not dict:
                        args = {}  # an empty dict is passed on as is, like any other
                    if transition.writes is not None:
                        self._apply_writes(transition.writes, scope)
                        values.clear()
                        clear = 0
                    self.event_count = n = self.event_count + 1
                    self._events.append(
                        _new(
                            Event,
                            (
                                _NEXT_SELECTED,
                                _SERVER,
                                step,
                                run.run_id,
                                None,
                                {"to": transition.id},
                                f"{self._stamp[0]}{n}",
                                self.execution_id,
                                None,
                                None,
                                None,
                                None,
                                None,
                                None,
                                None,
                            ),
                        )
                    )  # `record`, inlined
                    for place, entry in transition.entries:
                        token = Token(args, False, step)
                        if entry is not None:
                            self.ready.append((entry, token))
                        else:
                            self._put(place, token)
                        if feeds:
                            live.add(place)
                elif kind == "unhandled":
                    self._fail(
                        {
                            "code": "NOE853",
                            "message": str((error or {}).get("message", "step failed")),
                            "step": step,
                            "type": (error or {}).get("type"),
                            **{k: error[k] for k in _LOCATING if error and k in error},
                        }
                    )
                    return False
        if fired_route and name == _STEP_FAILED:
            self.handled_failures += 1
        if feeds and not any(
            p.endswith(".entry") and p[: -len(".entry")] in table.back_targets for p in live
        ):
            for place in feeds:
                if place not in live:
                    self._put(place, Token({}, dead=True, source=step))
        return fired_route

    # ------------------------------------------------------------------ tokens and joins

    def _put(self, place: str, token: Token) -> None:
        if place.endswith(".entry"):
            self.ready.append((place[: -len(".entry")], token))
            return
        for step, entering, payload in self.join_places.arrive(place, token):
            self.firings += 1
            if payload is not None:
                self.record(_JOIN_FIRED, step, payload)
            self.ready.append((step, entering))

    def _announce_dead(self, table: StepTable) -> None:
        for place in table.join_feeds:
            self._put(place, Token({}, dead=True, source=table.name))

    def _has_run(self, step: str) -> bool:
        record = self.steps.get(step)
        return record is not None and record.runs != 0

    def _apply_writes(self, value_index: int, scope: dict[str, Any]) -> None:
        writes = self.program.value(value_index, scope) or {}
        self._apply_ctx(list(writes.items()) if isinstance(writes, dict) else ())

    def _apply_ctx(self, writes: Any) -> None:
        limit = self.budgets["ctx_size"]
        sizes = self.ctx_sizes
        for key, value in writes:
            if isinstance(value, dict) and len(value) == 1 and "append" in value:
                current = self.ctx.get(key)
                self.ctx[key] = [*(current if isinstance(current, list) else []), value["append"]]
                size = sizes.get(key, 0) + 1 + deep_size(value["append"], limit or MAX_SIZE)
            else:
                self.ctx[key] = value
                size = deep_size(value, limit or MAX_SIZE)
            self.ctx_size += size - sizes.get(key, 0)
            sizes[key] = size
        if limit and self.ctx_size > limit:
            self._over("ctx_size", self.ctx_size, limit)

    def _fail(self, error: dict[str, Any]) -> None:
        if self.status == "running":
            self.status = "failed"
            self.error = error
            self.record(_EXECUTION_FAILED, error.get("step"), {"error": error})


# what a failed task says about where it failed (its name, the line of its code, the traceback,
# a tool's status, body excerpt or SQL position) and how to fix it (a keychain entry that is not
# set: which variable to export)
_LOCATING = (
    "task",
    "line",
    "code_line",
    "yaml",
    "traceback",
    "expression",
    "status",
    "body",
    "position",
    "hint",
)
