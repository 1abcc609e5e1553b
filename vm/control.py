"""The control VM: the token game over the control program (DESIGN §2.4, §4).

`ControlVM.start()` and `ControlVM.step(event)` turn events into commands and do no I/O; a
failure inside them becomes an execution failure, never an exception. Tokens live in places;
each place indexes the transitions that consume from it (the ready queue is the set of places
that just received tokens). A boundary event (`step.done`, `loop.done`, `step.failed`) is a
decision: every transition of that place listening to the event is evaluated, and the token is
consumed once for all that fire (inclusive routing forks, exclusive guards carry the negations
of earlier arcs). Dead tokens implement dead-path elimination for AND-joins.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from noetlc.vm.expr_runtime import Scope
from noetlc.vm.program import OP, ControlBlock, Program


class Token:
    __slots__ = ("args", "dead", "source")

    def __init__(self, args: dict[str, Any], dead: bool = False, source: str | None = None) -> None:
        self.args = args
        self.dead = dead
        self.source = source


@dataclass
class Command:
    kind: str  # "dispatch"
    step: str
    args: dict[str, Any]
    items: list[Any] | None = None  # loop steps: the evaluated items


@dataclass
class StepRecord:
    runs: int = 0
    status: str | None = None
    result: Any = None


@dataclass
class ControlVM:
    program: Program
    workload: dict[str, Any]
    execution_id: str
    ctx: dict[str, Any] = field(default_factory=dict)
    marking: dict[str, list[Token]] = field(default_factory=dict)
    steps: dict[str, StepRecord] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    error: dict[str, Any] | None = None
    status: str = "running"

    # ------------------------------------------------------------------ interface

    def start(self) -> list[Command]:
        self.record("workflow.started", None, {})
        self.put(f"{self.program.entry}.entry", Token({}))
        return self.settle()

    def step(self, event: dict[str, Any]) -> list[Command]:
        """Feed one boundary event of a dispatched step; return the commands it causes."""
        try:
            return self._step(event)
        except Exception as exc:
            self.fail(
                {
                    "code": "NOE850",
                    "message": f"{type(exc).__name__}: {exc}",
                    "step": event.get("step"),
                }
            )
            return []

    def finished(self) -> bool:
        return self.status != "running"

    # ------------------------------------------------------------------ internals

    def record(self, name: str, step: str | None, payload: dict[str, Any]) -> None:
        self.events.append(
            {"seq": len(self.events) + 1, "name": name, "step": step, "payload": payload}
        )

    def put(self, place: str, token: Token) -> None:
        self.marking.setdefault(place, []).append(token)

    def take(self, place: str) -> Token | None:
        tokens = self.marking.get(place)
        return tokens.pop(0) if tokens else None

    def scope(self, token: Token | None, event: dict[str, Any] | None) -> Scope:
        scope: Scope = {
            name: rec.result for name, rec in self.steps.items() if rec.status == "done"
        }
        scope.update(
            workload=self.workload,
            ctx=self.ctx,
            args=token.args if token is not None else {},
            execution_id=self.execution_id,
        )
        if event is not None:
            scope["event"] = event
        return scope

    def guard_passes(self, block: ControlBlock, scope: Scope) -> bool:
        for instruction in block.code:
            op = instruction[0]
            if op == OP["GUARD"] and not self.program.evaluate(instruction[1], scope):
                return False
            if op == OP["GUARD_NOT"] and self.program.evaluate(instruction[1], scope):
                return False
        return True

    def effects(
        self, block: ControlBlock, token: Token, scope: Scope, commands: list[Command]
    ) -> None:
        args: dict[str, Any] = {}
        for instruction in block.code:
            op = instruction[0]
            if op == OP["ARGS"]:
                args = self.program.value(instruction[1], scope) or {}
            elif op == OP["SET_CTX"]:
                self.ctx.update(self.program.value(instruction[1], scope) or {})
            elif op == OP["PRODUCE"]:
                self.put(
                    instruction[1],
                    Token(args if block.kind == "route" else token.args, source=block.step),
                )
            elif op == OP["DEAD"]:
                self.put(instruction[1], Token({}, dead=True, source=block.step))
            elif op == OP["EMIT"]:
                self.record(
                    self.program.names[instruction[1]],
                    block.step,
                    {"transition": block.id, "to": block.target},
                )
            elif op == OP["DISPATCH"]:
                step = self.program.names[instruction[1]]
                commands.append(Command("dispatch", step, token.args))
                # LOOP comes before DISPATCH in the block: attach the items now
                loop = next((i for i in block.code if i[0] == OP["LOOP"]), None)
                if loop is not None:
                    items = self.program.evaluate(loop[1], scope) if loop[1] is not None else []
                    commands[-1].items = list(items) if isinstance(items, list | tuple) else []
                self.in_flight += 1
                record = self.steps.setdefault(step, StepRecord())
                record.runs += 1
                self.record("step.scheduled", step, {"args": token.args})
            elif op == OP["FAIL_EXECUTION"]:
                self.fail(
                    self.error
                    or {
                        "code": "NOE851",
                        "message": f"step {block.step} failed and no arc handles it",
                        "step": block.step,
                    }
                )

    def settle(self) -> list[Command]:
        """Fire every transition that needs no event, until nothing changes."""
        commands: list[Command] = []
        changed = True
        while changed and self.status == "running":
            changed = False
            for place in list(self.marking):
                if not self.marking.get(place):
                    continue
                if place.endswith(".entry"):
                    changed |= self.admit(place, commands)
                elif ".from." in place:
                    changed |= self.try_join(place.split(".from.")[0])
        if self.status == "running" and self.in_flight == 0 and not commands:
            self.complete()
        return commands

    def admit(self, place: str, commands: list[Command]) -> bool:
        token = self.take(place)
        if token is None:
            return False
        step = place[: -len(".entry")]
        if token.dead:
            self.propagate_dead(step)
            return True
        scope = self.scope(token, None)
        for block in self.program.by_place.get(place, []):
            if block.kind not in ("start", "admit", "skip") or not self.guard_passes(block, scope):
                continue
            if block.kind == "skip":
                self.steps.setdefault(step, StepRecord()).status = "skipped"
                self.record("step.skipped", step, {})
                self.propagate_dead(step)
                return True
            self.record("step.started", step, {})
            self.effects(block, token, scope, commands)
            return True
        self.fail(
            {"code": "NOE852", "message": f"no admission transition fired for {step}", "step": step}
        )
        return True

    def propagate_dead(self, step: str) -> None:
        """Dead-path elimination: a step that will not run sends dead tokens downstream."""
        targets: dict[str, None] = {}
        for block in self.program.by_place.get(f"{step}.done", []):
            if block.kind in ("route", "dead"):
                for instruction in block.code:
                    if (
                        instruction[0] in (OP["PRODUCE"], OP["DEAD"])
                        and instruction[1] != "execution.sink"
                    ):
                        targets[instruction[1]] = None
        for place in targets:
            # only paths that end in an AND-join need to know (dead-path elimination)
            if ".from." in place or self._leads_to_join(place[: -len(".entry")]):
                self.put(place, Token({}, dead=True, source=step))

    def _leads_to_join(self, step: str) -> bool:
        return any(b.kind == "dead" for b in self.program.by_place.get(f"{step}.done", []))

    def try_join(self, step: str) -> bool:
        branches = self.program.joins.get(step)
        if not branches or not all(self.marking.get(b) for b in branches):
            return False
        tokens = [self.take(b) for b in branches]
        live = [t for t in tokens if t is not None and not t.dead]
        if not live:
            self.put(f"{step}.entry", Token({}, dead=True))
            return True
        merged = {t.source: t.args for t in live if t.source is not None}
        self.record("join.fired", step, {"branches": sorted(merged)})
        self.put(f"{step}.entry", Token(merged))
        return True

    def _step(self, event: dict[str, Any]) -> list[Command]:
        name, step = event["name"], event["step"]
        self.in_flight -= 1
        record = self.steps.setdefault(step, StepRecord())
        data = event.get("data", {})
        if name in ("step.done", "loop.done"):
            record.status = "done"
            record.result = data.get("result")
            place = f"{step}.done"
        else:
            record.status = "failed"
            self.error = {
                "code": "NOE853",
                "message": str((data.get("error") or {}).get("message", "step failed")),
                "step": step,
            }
            place = f"{step}.failed"
        self.record(name, step, {"status": record.status})
        token = Token(event.get("args", {}))
        guard_event = {"name": name, "step": step, "data": data}
        scope = self.scope(token, guard_event)
        scope[step] = record.result
        firing = [
            b
            for b in self.program.by_place.get(place, [])
            if name in b.events and self.guard_passes(b, scope)
        ]
        commands: list[Command] = []
        for block in firing:
            self.effects(block, token, scope, commands)
        if name == "step.failed" and any(b.kind == "route" for b in firing):
            self.error = None  # handled by a failure arc
        commands.extend(self.settle())
        return commands

    def fail(self, error: dict[str, Any]) -> None:
        if self.status == "running":
            self.status = "failed"
            self.error = error
            self.record("execution.failed", error.get("step"), {"error": error})

    def complete(self) -> None:
        stuck = [
            p
            for p, tokens in self.marking.items()
            if tokens and ".from." in p and any(not t.dead for t in tokens)
        ]
        if stuck:
            step = stuck[0].split(".from.")[0]
            self.fail(
                {
                    "code": "NOE854",
                    "message": f"deadlock: the join `{step}` can never fire",
                    "step": step,
                }
            )
            return
        self.status = "completed"
        self.record("workflow.finished", None, {"status": "completed"})
