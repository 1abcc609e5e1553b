"""How a finished run moves tokens: its boundary event (`finish`, `loop_done`,
`route_boundary`) decides its arcs (`route`), which put tokens on step entries and join
places (`put`), write ctx and record the server events. Functions of the VM's state
(`ControlState`, vm/control_state.py); admission (vm/admission.py) builds on them."""

from __future__ import annotations

from typing import Any

from noetlc.expr.limits import MAX_SIZE, deep_size
from noetlc.ir.events import EventName
from noetlc.vm.control_state import ControlState, LoopRun, StepRun, arc_output, loop_result
from noetlc.vm.joins import Token
from noetlc.vm.protocol import Event, Source
from noetlc.vm.tables import DecodedTransition, StepTable, clear_prefix

__all__ = [
    "announce_dead",
    "apply_ctx",
    "apply_writes",
    "finish",
    "loop_done",
    "put",
    "route",
    "route_boundary",
]

_JOIN_FIRED = EventName.JOIN_FIRED.value
_LOOP_DONE = EventName.LOOP_DONE.value
_NEXT_SELECTED = EventName.NEXT_SELECTED.value
_STEP_FAILED = EventName.STEP_FAILED.value
_SERVER = Source.SERVER.value
_new = tuple.__new__  # an Event without its Python-level __new__ (one per transition)
_NOTHING_LIVE: set[str] = set()  # a step that feeds no join tracks no live places (never added to)


def loop_done(vm: ControlState, run: LoopRun, stopped: int | None = None) -> None:
    """A loop's last iteration is in (or `stop_when` ended it after iteration `stopped`)."""
    data: dict[str, Any] = {"count": len(run.items), "failed": run.failures}
    if stopped is not None:
        data["stopped_after"] = stopped
    vm.record(_LOOP_DONE, run.step, data, run.run_id)
    finish(vm, run, _LOOP_DONE, loop_result(run), None)


def finish(
    vm: ControlState, run: StepRun, name: str, result: Any, error: dict[str, Any] | None
) -> None:
    """An active run ends with its terminal event `name`."""
    del vm.runs[run.run_id]
    vm.firings += 1  # the net's complete / fail / loop_done transition
    route_boundary(vm, run, name, result, error)


def route_boundary(
    vm: ControlState, run: StepRun, name: str, result: Any, error: dict[str, Any] | None
) -> None:
    """Route a finished step: its boundary event decides the arcs."""
    step = run.step
    table = vm.tables[step]
    record = vm.steps[step]
    scope = vm.scope
    if name == _STEP_FAILED:
        record.status = "failed"
        data: dict[str, Any] = {"error": error}
        routes = table.failed_on.get(name, ())
    else:
        record.status = "done"
        record.result = result
        vm.results[step] = result
        scope[step] = result
        vm.final_result = result
        data = {"result": result}
        if name == _LOOP_DONE:
            data.update(count=len(run.items), failed=run.failures)
        routes = table.done_on.get(name, ())
    scope["args"] = run.args
    scope["event"] = {"name": name, "step": step, "data": data}
    scope["output"] = arc_output(result, (error or {}) if name == _STEP_FAILED else None)
    route(vm, run, table, routes, name, scope, error)


def route(
    vm: ControlState,
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
            vm.firings += 1
            kind = transition.kind
            if kind == "route":
                fired_route = True
                fired.update(e for e, negated in transition.guards if not negated)
                if transition.args is None:
                    args = run.args
                else:
                    args = vm.program.value(transition.args, scope)
                if not args and type(args) is not dict:
                    args = {}  # an empty dict is passed on as is, like any other
                if transition.writes is not None:
                    apply_writes(vm, transition.writes, scope)
                    values.clear()
                    clear = 0
                vm.event_count = n = vm.event_count + 1
                vm._events.append(
                    _new(
                        Event,
                        (
                            _NEXT_SELECTED,
                            _SERVER,
                            step,
                            run.run_id,
                            None,
                            {"to": transition.id},
                            f"{vm._stamp[0]}{n}",
                            vm.execution_id,
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
                        vm.ready.append((entry, token))
                    else:
                        put(vm, place, token)
                    if feeds:
                        live.add(place)
            elif kind == "unhandled":
                vm.fail(
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
        vm.handled_failures += 1
    if feeds and not any(
        p.endswith(".entry") and p[: -len(".entry")] in table.back_targets for p in live
    ):
        for place in feeds:
            if place not in live:
                put(vm, place, Token({}, dead=True, source=step))
    return fired_route


def put(vm: ControlState, place: str, token: Token) -> None:
    if place.endswith(".entry"):
        vm.ready.append((place[: -len(".entry")], token))
        return
    for step, entering, payload in vm.join_places.arrive(place, token):
        vm.firings += 1
        if payload is not None:
            vm.record(_JOIN_FIRED, step, payload)
        vm.ready.append((step, entering))


def announce_dead(vm: ControlState, table: StepTable) -> None:
    for place in table.join_feeds:
        put(vm, place, Token({}, dead=True, source=table.name))


def apply_writes(vm: ControlState, value_index: int, scope: dict[str, Any]) -> None:
    writes = vm.program.value(value_index, scope) or {}
    apply_ctx(vm, list(writes.items()) if isinstance(writes, dict) else ())


def apply_ctx(vm: ControlState, writes: Any) -> None:
    limit = vm.budgets["ctx_size"]
    sizes = vm.ctx_sizes
    for key, value in writes:
        if isinstance(value, dict) and len(value) == 1 and "append" in value:
            current = vm.ctx.get(key)
            vm.ctx[key] = [*(current if isinstance(current, list) else []), value["append"]]
            size = sizes.get(key, 0) + 1 + deep_size(value["append"], limit or MAX_SIZE)
        else:
            vm.ctx[key] = value
            size = deep_size(value, limit or MAX_SIZE)
        vm.ctx_size += size - sizes.get(key, 0)
        sizes[key] = size
    if limit and vm.ctx_size > limit:
        vm._over("ctx_size", vm.ctx_size, limit)


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
