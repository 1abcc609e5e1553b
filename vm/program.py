"""A `.nbc` payload decoded once into the tables the VMs run from.

Expressions are compiled to callables (`expr_runtime.load_pool`), values stay as data with
`{"$e": i}` leaves (evaluated by `evaluate_value`), control blocks are grouped by the place
they consume from (the incremental ready queue indexes them), pipeline blocks by step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from noetlc.expr.runtime import REF_KEY, RESOLVER_KEY, Evaluator, Scope, load_pool
from noetlc.ir.opcodes import BY_MNEMONIC

OP = {name: op.code for name, op in BY_MNEMONIC.items()}


@dataclass(frozen=True, slots=True)
class ControlBlock:
    id: str
    kind: str
    step: str | None
    target: str | None
    code: tuple[tuple[Any, ...], ...]
    events: frozenset[str]
    consumes: tuple[str, ...]
    line: int


@dataclass(frozen=True, slots=True)
class StepInfo:
    name: str
    tasks: tuple[str, ...]
    loop: dict[str, Any] | None
    pipeline: tuple[tuple[Any, ...], ...]
    task_pcs: dict[str, int]
    next_task_pc: dict[int, int]  # pc of a TASK -> pc of the next TASK (or END)
    line: int
    file: str = ""


class Program:
    """Everything both VMs need, decoded from one payload."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload
        self.name: str = payload["metadata"]["name"]
        self.entry: str = payload["entry"]
        self.workload: dict[str, Any] = payload["workload"] or {}
        self.names: list[str] = payload["names"]
        self.expressions: list[Evaluator] = load_pool(payload["expressions"])
        self.expression_sources: list[str] = [e.get("source", "") for e in payload["expressions"]]
        self.values: list[Any] = payload["values"]
        self.positions: list[list[Any]] = payload["positions"]
        self.joins: dict[str, tuple[str, ...]] = {
            step: tuple(f"{step}.from.{b}" for b in branches)
            for step, kind, _fork, branches in payload["joins"]
            if kind != "each"
        }
        self.join_kind: dict[str, str] = {step: kind for step, kind, _f, _b in payload["joins"]}
        # each decision place's guards in order: `GUARD_NOT_ANY n` negates the first n
        self.decisions: dict[str, tuple[Evaluator, ...]] = {
            place: tuple(self.expressions[i] for i in guards)
            for place, guards in payload.get("decisions", [])
        }
        self.blocks: list[ControlBlock] = []
        self.by_place: dict[str, list[ControlBlock]] = {}
        for tid, kind, step, target, code, positions in payload["control"]:
            instructions = tuple(tuple(i) for i in code)
            events = frozenset(self.names[i[1]] for i in instructions if i[0] == OP["ON"])
            consumes = tuple(i[1] for i in instructions if i[0] == OP["CONSUME"])
            line = self.positions[positions[0]][1] if positions else 0
            block = ControlBlock(tid, kind, step, target, instructions, events, consumes, line)
            self.blocks.append(block)
            for place in consumes[:1]:
                self.by_place.setdefault(place, []).append(block)
        self.workbook: dict[str, tuple[str, int, int | None]] = {
            name: (kind, args, spec) for name, kind, args, spec in payload.get("workbook", [])
        }
        self.steps: dict[str, StepInfo] = {}
        pipelines = {name: (code, positions) for name, code, positions in payload["pipelines"]}
        for info in payload["steps"]:
            code, positions = pipelines[info["name"]]
            instructions = tuple(tuple(i) for i in code)
            task_pcs = [pc for pc, i in enumerate(instructions) if i[0] == OP["TASK"]]
            end_pc = next(pc for pc, i in enumerate(instructions) if i[0] == OP["END"])
            firsts = [*task_pcs, end_pc]
            self.steps[info["name"]] = StepInfo(
                name=info["name"],
                tasks=tuple(info["tasks"]),
                loop=info.get("loop"),
                pipeline=instructions,
                task_pcs={self.names[instructions[pc][1]]: pc for pc in task_pcs},
                next_task_pc={pc: firsts[i + 1] for i, pc in enumerate(task_pcs)},
                line=self.positions[positions[0]][1] if positions else 0,
                file=str(self.positions[positions[0]][0]) if positions else "",
            )

    def evaluate(self, index: int, scope: Scope) -> Any:
        return self.expressions[index](scope)

    def value(self, index: int | None, scope: Scope) -> Any:
        if index is None:
            return None
        return evaluate_value(self.values[index], self.expressions, scope)


def evaluate_value(value: Any, expressions: list[Evaluator], scope: Scope) -> Any:
    """Walk a value-pool entry, evaluating `{"$e": i}` leaves (DESIGN §2.3: native values)."""
    if isinstance(value, dict):
        if "$e" in value and len(value) == 1:
            result = _plain(expressions[value["$e"]](scope))
            if type(result) is dict and REF_KEY in result and RESOLVER_KEY in scope:
                return scope[RESOLVER_KEY](result[REF_KEY])  # data for tools, not a reference
            return result
        body = value.get("$lit", value) if len(value) == 1 and "$lit" in value else value
        return {k: evaluate_value(v, expressions, scope) for k, v in body.items()}
    if isinstance(value, list):
        return [evaluate_value(v, expressions, scope) for v in value]
    return value


def _plain(value: Any) -> Any:
    """Undefined results become None when stored as data."""
    from jinja2 import Undefined

    if isinstance(value, Undefined):
        return None
    return value
