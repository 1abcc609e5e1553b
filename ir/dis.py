"""A dis-style listing of a `.nbc` payload: every instruction with its YAML line.

    control  start->big#0  (route, to big; records next.selected)
        16  0 ON        step.done
        16  1 GUARD     e1  {{ start.amount > 100 }}
        ...
    pipeline start
         7  0 TASK      start_task python args=v0
        ...

Jump targets get labels (`>>`), operands are resolved against the pools. Each control block's
header names the event the control VM records when it fires.
"""

from __future__ import annotations

from typing import Any

from noetlc.ir.events import EventName
from noetlc.ir.opcodes import BY_CODE, BY_MNEMONIC


def disassemble(payload: dict[str, Any]) -> str:
    names: list[str] = payload["names"]
    exprs: list[dict[str, Any]] = payload["expressions"]
    positions: list[list[Any]] = payload["positions"]
    meta = payload["metadata"]
    out = [f"playbook {meta['name']} (entry {payload['entry']})"]
    out.append(f"  {len(exprs)} expressions, {len(payload['values'])} values, {len(names)} names")
    for join in payload["joins"]:
        step, kind, fork, branches = join
        out.append(f"  join {step}: {kind} (fork {fork or '-'}; branches {', '.join(branches)})")
    for place, guards in payload.get("decisions", []):
        # what `GUARD_NOT_ANY n` of a block consuming `place` negates: the first n of these
        out.append(f"  decision {place}")
        out.extend(
            f"    {rank:>5} {_operand('expr', 'expr', g, names, exprs)}"
            for rank, g in enumerate(guards)
        )
    listeners = {s["name"] for s in payload["steps"] if s.get("listener") is not None}
    for tid, kind, step, target, code, pos in payload["control"]:
        suffix = f", to {target}" if target else ""
        records = recorded_event(kind, code, step in listeners)
        suffix += f"; records {records}" if records else ""
        out.append(f"\ncontrol {tid}  ({kind}{suffix})")
        out.extend(_block(code, pos, names, exprs, positions))
    for step, code, pos in payload["pipelines"]:
        out.append(f"\npipeline {step}")
        out.extend(_block(code, pos, names, exprs, positions))
    return "\n".join(out) + "\n"


# What the control VM records when a block of each transition kind fires (vm/control.py,
# vm/routing.py); a block that enters a step records what its ADMIT decides.
RECORDED = {
    "skip": EventName.STEP_SKIPPED.value,
    "route": EventName.NEXT_SELECTED.value,
    "join": EventName.JOIN_FIRED.value,
    "complete": EventName.STEP_DONE.value,
    "fail": EventName.STEP_FAILED.value,
    "iter_start": EventName.LOOP_ITERATION_STARTED.value,
    "loop_done": EventName.LOOP_DONE.value,
    "unhandled": EventName.EXECUTION_FAILED.value,
}
_ADMIT = BY_MNEMONIC["ADMIT"].code
_LOOP = BY_MNEMONIC["LOOP"].code


def recorded_event(kind: str, code: list[list[Any]], listener: bool) -> str | None:
    """The event the control VM records when this block fires (None: none of its own)."""
    if any(i[:2] == [_ADMIT, 1] for i in code):
        if listener:
            return EventName.STEP_STARTED.value
        return (
            EventName.LOOP_STARTED.value
            if any(i[:1] == [_LOOP] for i in code)
            else EventName.STEP_SCHEDULED.value
        )
    if kind in ("start", "admit"):
        return None  # a listener's `listen` block: the step's own run was recorded already
    return RECORDED.get(kind)


def _block(
    code: list[list[Any]],
    pos: list[int],
    names: list[str],
    exprs: list[dict[str, Any]],
    positions: list[list[Any]],
) -> list[str]:
    targets = set()
    for instruction in code:
        op = BY_CODE.get(instruction[0])
        if op is None:
            continue
        for (_, kind), value in zip(op.operands, instruction[1:]):
            if kind == "label" and isinstance(value, int):
                targets.add(value)
    lines = []
    for pc, instruction in enumerate(code):
        op = BY_CODE.get(instruction[0])
        line = positions[pos[pc]][1] if pc < len(pos) and pos[pc] < len(positions) else 0
        mark = ">>" if pc in targets else "  "
        if op is None:
            lines.append(f"  {line:>5} {mark}{pc:>3} ??? {instruction!r}")
            continue
        shown = []
        for (name, kind), value in zip(op.operands, instruction[1:]):
            shown.append(_operand(name, kind, value, names, exprs))
        lines.append(f"  {line:>5} {mark}{pc:>3} {op.mnemonic:<14} {' '.join(shown)}".rstrip())
    return lines


def _operand(
    name: str, kind: str, value: Any, names: list[str], exprs: list[dict[str, Any]]
) -> str:
    if value is None:
        return f"{name}=-"
    if kind == "name" and isinstance(value, int) and value < len(names):
        return names[value]
    if kind == "expr" and isinstance(value, int) and value < len(exprs):
        return f"e{value} {exprs[value].get('source')!r}"
    if kind == "value":
        return f"v{value}"
    if kind == "label":
        return f"-> {value}"
    return str(value)
