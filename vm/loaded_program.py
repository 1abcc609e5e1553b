"""A verified program (`noetlc.ir.program.Program`) decoded once into the tables the VMs run from.

Expressions become callables by compiling their sources again (`noetlc.expr.loader`: stored
code is never run; an entry whose code hash differs is refused with NOE705), values stay as
data with `{"$e": i}` leaves (evaluated by `evaluate_value`), pipeline blocks are indexed by
step; the control program's transition records become step tables (vm/tables.py).
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
from noetlc.vm.budgets import budgets_for

OP = {name: op.code for name, op in BY_MNEMONIC.items()}


@dataclass(frozen=True, slots=True)
class StepInfo:
    name: str
    tasks: tuple[str, ...]
    loop: dict[str, Any] | None
    listener: dict[str, Any] | None
    pipeline: tuple[tuple[Any, ...], ...]
    task_pcs: dict[str, int]
    next_task_pc: dict[int, int]  # pc of a TASK -> pc of the next TASK (or the step's end)
    line: int
    file: str = ""
    # where a successful pipeline ends: the step-level ctx writes (`set:`, SET_CTX_P right
    # before END; a rule's writes are always followed by its action) or END
    end_pc: int = 0


class LoadedProgram:
    """Everything both VMs need, from one verified program, read from its typed fields.

    Takes a `noetlc.ir.program.Program` (from `Program.decode`, or the compiler's), or a
    payload map, which is read and verified first (`BytecodeError` NOE704 if it does not)."""

    def __init__(self, program: ir_program.Program | dict[str, Any]) -> None:
        if not isinstance(program, ir_program.Program):
            program = ir_program.Program.from_payload(program)
            program.check()
        self.image = program
        self.name: str = program.metadata.name
        self.entry: str = program.entry
        self.workload: dict[str, Any] = program.workload
        self.keychain: tuple[dict[str, Any], ...] = program.keychain
        self.executor_spec: dict[str, Any] | None = program.executor_spec
        self.budgets: dict[str, int] = budgets_for(program.executor_spec)
        self.names: tuple[str, ...] = program.names
        self.expressions: list[Evaluator] = load_expressions(program)
        self.expression_sources: list[str] = [e.source for e in program.expressions]
        self.values: tuple[Any, ...] = program.values
        self.positions: tuple[ir_program.DebugPosition, ...] = program.positions
        self.joins: dict[str, tuple[str, ...]] = {
            j.step: tuple(f"{j.step}.from.{b}" for b in j.branches)
            for j in program.joins
            if j.kind != "each"
        }
        self.join_kind: dict[str, str] = {j.step: j.kind for j in program.joins}
        # each decision place's guards in order: a transition's `earlier n` negates the first n
        self.decisions: dict[str, tuple[Evaluator, ...]] = {
            d.place: tuple(self.expressions[i] for i in d.guards) for d in program.decisions
        }
        # the control program's transition records, as stored: vm/tables.py turns them
        # into step tables with callables (once per program)
        self.transitions: tuple[ir_program.TransitionInfo, ...] = program.control
        self.workbook: dict[str, tuple[str, int, int | None]] = {
            w.name: (w.kind, w.args, w.spec) for w in program.workbook
        }
        self.steps: dict[str, StepInfo] = {}
        pipelines = {b.step: (b.code, b.positions) for b in program.pipelines}
        for facts in program.steps:
            instructions, positions = pipelines[facts.name]
            task_pcs = [pc for pc, i in enumerate(instructions) if i[0] == OP["TASK"]]
            end_pc = next(pc for pc, i in enumerate(instructions) if i[0] == OP["END"])
            while end_pc > 0 and instructions[end_pc - 1][0] == OP["SET_CTX_P"]:
                end_pc -= 1
            firsts = [*task_pcs, end_pc]
            first = self.positions[positions[0]] if positions else None
            self.steps[facts.name] = StepInfo(
                name=facts.name,
                tasks=facts.tasks,
                loop=facts.loop,
                listener=facts.listener,
                pipeline=instructions,
                task_pcs={self.names[instructions[pc][1]]: pc for pc in task_pcs},
                next_task_pc={pc: firsts[i + 1] for i, pc in enumerate(task_pcs)},
                end_pc=end_pc,
                line=first.line if first is not None else 0,
                file=first.file if first is not None else "",
            )

    @property
    def payload(self) -> dict[str, Any]:
        """The program's payload map (made once, on first use, and kept on the program): for
        readers that still take the plain form; the VMs read the typed fields above."""
        return self.image.payload

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
