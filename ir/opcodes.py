"""The opcode table of the pipeline program, the one instruction set.

The assembler (`compiler/passes/lower.py`) emits instructions as tuples `(opcode, *operands)`;
the disassembler (`ir/dis.py`) and the verifier (`verify_code`) read operand kinds from here;
`vm/README.md`'s opcode reference is generated from it (`python -m noetlc.ir.opcodes`).

The control program is not instructions: its transitions are records
(`noetlc.ir.program.TransitionInfo`, docs/bytecode.md "The control program"). Codes 1-15
were its instructions up to format 3; they are not reused.

Operand kinds: `expr` (expression pool index), `value` (value pool index), `place`
(place name), `name` (name pool index: steps, tasks, events), `label` (instruction index in
the same code block), `int`, `float`.
"""

from __future__ import annotations

import reprlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

ProgramKind = Literal["pipeline"]
OperandKind = Literal["expr", "value", "place", "name", "label", "int", "float"]


@dataclass(frozen=True, slots=True)
class Opcode:
    """One opcode: its number, mnemonic and operands."""

    code: int
    mnemonic: str
    program: ProgramKind
    operands: tuple[tuple[str, OperandKind], ...]
    doc: str


OPCODES: tuple[Opcode, ...] = (
    # ---- pipeline program: one block per step, tasks in order ----------------------------
    Opcode(
        32,
        "TASK",
        "pipeline",
        (("task", "name"), ("kind", "name"), ("args", "value"), ("spec", "value")),
        "start a task: evaluate its arguments, call the tool, bind the outcome",
    ),
    Opcode(
        33,
        "RULE",
        "pipeline",
        (("expr", "expr"), ("then", "label")),
        "if the rule's condition holds, go to its action",
    ),
    Opcode(34, "ELSE", "pipeline", (("then", "label"),), "the `else` rule: go to its action"),
    Opcode(
        35,
        "UNMATCHED",
        "pipeline",
        (("mode", "int"),),
        "no rule matched: 0 = ok continues, error fails; 1 = continue",
    ),
    Opcode(
        36,
        "SET_ITER",
        "pipeline",
        (("value", "value"),),
        "evaluate and apply iteration-scope writes",
    ),
    Opcode(
        37,
        "SET_CTX_P",
        "pipeline",
        (("value", "value"),),
        "evaluate and apply execution-scope writes (as task.done payload)",
    ),
    Opcode(
        38,
        "CONTINUE",
        "pipeline",
        (),
        "go on with the next task (or finish the pipeline after the last)",
    ),
    Opcode(
        39,
        "RETRY",
        "pipeline",
        (
            ("attempts", "int"),
            ("backoff", "name"),
            ("delay", "float"),
            ("max_delay", "float"),
            ("jitter", "float"),
        ),
        "run the task again after the backoff delay, unless `attempts` tries were made",
    ),
    Opcode(40, "JUMP", "pipeline", (("task", "label"),), "go to another task of the pipeline"),
    Opcode(41, "BREAK", "pipeline", (), "end the pipeline successfully with this task's result"),
    Opcode(42, "FAIL", "pipeline", (), "end the pipeline as a failure with this task's error"),
    Opcode(43, "END", "pipeline", (), "the pipeline finished: step.done with the last result"),
    Opcode(
        44,
        "OK_SET_ITER",
        "pipeline",
        (("value", "value"),),
        "task-level `set:` (corpus dialect): iteration writes applied when the outcome is ok, before the rules",
    ),
    Opcode(
        45,
        "OK_SET_CTX",
        "pipeline",
        (("value", "value"),),
        "task-level `set:` with `ctx.` keys: execution writes applied when the outcome is ok",
    ),
    Opcode(
        46,
        "RETRY_DELAYS",
        "pipeline",
        (("delay", "value"), ("max_delay", "value")),
        "evaluate a retry's `delay`/`max_delay` written as templates; the next RETRY uses them",
    ),
)

BY_CODE: dict[int, Opcode] = {op.code: op for op in OPCODES}
BY_MNEMONIC: dict[str, Opcode] = {op.mnemonic: op for op in OPCODES}


def verify_code(
    code: Sequence[Sequence[object]], program: ProgramKind, pools: dict[str, int]
) -> list[str]:
    """Check a block: known opcodes of the right program, operand counts, types and ranges.

    `expr`, `value`, `name` and `label` operands are indices below `pools[kind]` (when given);
    `expr` and `value` may be None (absent), `float` too (no limit); `int` is an integer and
    `place` a place name (the program's verifier checks that the place exists)."""
    problems: list[str] = []
    by_code = BY_CODE
    for pc, instruction in enumerate(code):
        head = instruction[0] if instruction else None
        op = by_code.get(head) if type(head) is int else None
        if op is None:
            problems.append(f"{pc}: unknown opcode {shown(list(instruction[:1]))}")
            continue
        if op.program != program:
            problems.append(f"{pc}: {op.mnemonic} is not a {program} instruction")
        wanted = op.operands
        if len(instruction) - 1 != len(wanted):
            problems.append(
                f"{pc}: {op.mnemonic} takes {len(wanted)} operands, got {len(instruction) - 1}"
            )
            continue
        for i, (name, kind) in enumerate(wanted, 1):
            value = instruction[i]
            if kind in _INDEXED:  # the common case, inlined (a verify runs on every load)
                if value is None:
                    ok = (kind == "expr" or kind == "value") and op.mnemonic not in _EXPR_REQUIRED
                else:
                    limit = pools.get(kind)
                    ok = type(value) is int and value >= 0 and (limit is None or value < limit)
            else:
                ok = _operand_ok(kind, value, pools.get(kind))
            if not ok:
                problems.append(
                    f"{pc}: {op.mnemonic} {name}={shown(value)} is out of range or not a {kind}"
                )
    return problems


# Operands come from untrusted files: a message shows them bounded in depth and length (the
# built-in repr of a list nested 1,000 deep overflows the stack).
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 3
_SHOWN.maxstring = 60
_SHOWN.maxother = 60


def shown(value: object) -> str:
    """A bounded repr of an untrusted value, for messages."""
    return _SHOWN.repr(value)


_INDEXED = frozenset({"expr", "value", "name", "label"})
# Instructions that evaluate their expression: it cannot be absent.
_EXPR_REQUIRED = frozenset({"RULE"})


def _operand_ok(kind: OperandKind, value: object, limit: int | None) -> bool:
    if kind in ("expr", "value", "name", "label"):
        if value is None:
            return kind in ("expr", "value")
        return type(value) is int and value >= 0 and (limit is None or value < limit)
    if kind == "place":
        return type(value) is str
    if kind == "int":
        return type(value) is int
    return value is None or type(value) in (int, float)  # float


def reference_markdown() -> str:
    """The opcode reference for vm/README.md."""
    lines = ["| code | mnemonic | program | operands | meaning |", "|---:|---|---|---|---|"]
    for op in OPCODES:
        operands = ", ".join(f"{n}:{k}" for n, k in op.operands) or "—"
        lines.append(f"| {op.code} | `{op.mnemonic}` | {op.program} | {operands} | {op.doc} |")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - `python -m noetlc.ir.opcodes`
    sys.stdout.write(reference_markdown() + "\n")
