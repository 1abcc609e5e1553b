"""A verified program (`noetlc.ir.program.Program`) decoded once into the tables the VMs run from.

Expressions become callables by compiling their sources again (`noetlc.expr.loader`: stored
code is never run; an entry whose code hash differs is refused with NOE705), values stay as
data with `{"$e": i}` leaves (evaluated by `evaluate_value`), control blocks are grouped by
the place they consume from, pipeline blocks by step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from noetlc.expr import undefined
from noetlc.expr.loader import PoolMismatch, load_expression
from noetlc.expr.runtime import REF_KEY, RESOLVER_KEY, Evaluator, Scope
from noetlc.ir import program as ir_program
from noetlc.ir.nbc import BytecodeError
from noetlc.ir.opcodes import BY_MNEMONIC

OP = {name: op.code for name, op in BY_MNEMONIC.items()}


@dataclass(frozen=True, slots=True)
class LoadedControlBlock:
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
    next_task_pc: dict[int, int]  # pc of a TASK -> pc of the next TASK (or the step's end)
    line: int
    file: str = ""
    # where a successful pipeline ends: the step-level ctx writes (`set:`, SET_CTX_P right
    # before END; a rule's writes are always followed by its action) or END
    end_pc: int = 0


class LoadedProgram:
    """Everything both VMs need, from one verified program.

    Takes a `noetlc.ir.program.Program` (from `Program.decode`, or the compiler's), or a
    payload map, which is read and verified first (`BytecodeError` NOE704 if it does not)."""

    def __init__(self, program: ir_program.Program | dict[str, Any]) -> None:
        if not isinstance(program, ir_program.Program):
            program = ir_program.Program.from_payload(program)
            program.check()
        self.image = program
        payload = self.payload = program.to_payload()
        self.name: str = program.metadata.name
        self.entry: str = program.entry
        self.workload: dict[str, Any] = program.workload
        self.names: list[str] = payload["names"]
        self.expressions: list[Evaluator] = load_expressions(program)
        self.expression_sources: list[str] = [e.source for e in program.expressions]
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
        self.blocks: list[LoadedControlBlock] = []
        self.by_place: dict[str, list[LoadedControlBlock]] = {}
        for b in program.control:
            tid, kind, step, target, instructions, positions = (
                b.id,
                b.kind,
                b.step,
                b.target,
                b.code,
                b.positions,
            )
            events = frozenset(self.names[i[1]] for i in instructions if i[0] == OP["ON"])
            consumes = tuple(i[1] for i in instructions if i[0] == OP["CONSUME"])
            line = self.positions[positions[0]][1] if positions else 0
            block = LoadedControlBlock(
                tid, kind, step, target, instructions, events, consumes, line
            )
            self.blocks.append(block)
            for place in consumes[:1]:
                self.by_place.setdefault(place, []).append(block)
        self.workbook: dict[str, tuple[str, int, int | None]] = {
            name: (kind, args, spec) for name, kind, args, spec in payload.get("workbook", [])
        }
        self.steps: dict[str, StepInfo] = {}
        pipelines = {b.step: (b.code, b.positions) for b in program.pipelines}
        for info in payload["steps"]:
            instructions, positions = pipelines[info["name"]]
            task_pcs = [pc for pc, i in enumerate(instructions) if i[0] == OP["TASK"]]
            end_pc = next(pc for pc, i in enumerate(instructions) if i[0] == OP["END"])
            while end_pc > 0 and instructions[end_pc - 1][0] == OP["SET_CTX_P"]:
                end_pc -= 1
            firsts = [*task_pcs, end_pc]
            self.steps[info["name"]] = StepInfo(
                name=info["name"],
                tasks=tuple(info["tasks"]),
                loop=info.get("loop"),
                pipeline=instructions,
                task_pcs={self.names[instructions[pc][1]]: pc for pc in task_pcs},
                next_task_pc={pc: firsts[i + 1] for i, pc in enumerate(task_pcs)},
                end_pc=end_pc,
                line=self.positions[positions[0]][1] if positions else 0,
                file=str(self.positions[positions[0]][0]) if positions else "",
            )

    def evaluate(self, index: int, scope: Scope) -> Any:
        return self.expressions[index](scope)

    def value(self, index: int | None, scope: Scope) -> Any:
        if index is None:
            return None
        return evaluate_value(self.values[index], self.expressions, scope)


def load_expressions(program: ir_program.Program) -> list[Evaluator]:
    """The pool's callables, compiled from the sources; a tampered entry is NOE705."""
    try:
        return [
            load_expression(i, e.kind, e.source, e.mode, e.sha256, e.value, e.where)
            for i, e in enumerate(program.expressions)
        ]
    except PoolMismatch as exc:
        raise BytecodeError(
            "NOE705",
            f"the expression pool does not match its sources: {exc}",
            "recompile the playbook with the installed noetlc; never edit compiled bytecode",
        ) from None


def evaluate_value(value: Any, expressions: list[Evaluator], scope: Scope) -> Any:
    """Walk a value-pool entry, evaluating `{"$e": i}` leaves (a lone `{{ expr }}` is its native value)."""
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
    if isinstance(value, undefined.Undefined):
        return None
    return value
