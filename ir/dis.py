"""A dis-style listing of a program: the control program's transition records and the
pipeline programs' instructions, each line with its YAML line.

    control  start->big#0  (route, to big; records next.selected)
        16 on             step.done
        16 guard          e1 '{{ start.amount > 100 }}'
        ...
    pipeline start
         7    0 TASK           start_task python args=v0
        ...

A transition is listed field by field, in the order the control VM applies them (only the
fields it has); pipeline jump targets get labels (`>>`); operands are resolved against the
pools. Each transition's header names the event the control VM records when it fires.
"""

from __future__ import annotations

from typing import Any

from noetlc.ir.events import EventName
from noetlc.ir.opcodes import BY_CODE
from noetlc.ir.program import Expression, Program, TransitionInfo


def disassemble(program: Program | dict[str, Any]) -> str:
    """The listing of a program (a payload map is read as one first)."""
    if not isinstance(program, Program):
        program = Program.from_payload(program)
    names, exprs = program.names, program.expressions
    out = [f"playbook {program.metadata.name} (entry {program.entry})"]
    out.append(f"  {len(exprs)} expressions, {len(program.values)} values, {len(names)} names")
    for join in program.joins:
        out.append(
            f"  join {join.step}: {join.kind} (fork {join.fork or '-'};"
            f" branches {', '.join(join.branches)})"
        )
    for decision in program.decisions:
        # what a transition's `earlier n` at `place` must find false: the first n of these
        out.append(f"  decision {decision.place}")
        out.extend(f"    {rank:>5} {_expr(g, exprs)}" for rank, g in enumerate(decision.guards))
    listeners = {s.name for s in program.steps if s.listener is not None}
    for t in program.control:
        suffix = f", to {t.target}" if t.target else ""
        records = recorded_event(t, t.step in listeners)
        suffix += f"; records {records}" if records else ""
        out.append(f"\ncontrol {t.id}  ({t.kind}{suffix})")
        line = program.positions[t.position].line if t.position < len(program.positions) else 0
        out.extend(f"  {line:>5} {field:<14} {text}".rstrip() for field, text in _fields(t, exprs))
    for block in program.pipelines:
        out.append(f"\npipeline {block.step}")
        out.extend(_block(block.code, block.positions, program))
    return "\n".join(out) + "\n"


def _fields(t: TransitionInfo, exprs: tuple[Expression, ...]) -> list[tuple[str, str]]:
    """A transition's fields, in the order the control VM applies them."""
    rows = [("on", event) for event in t.on]
    rows += [("guard_not" if neg else "guard", _expr(e, exprs)) for e, neg in t.guards]
    if t.earlier:
        rows.append(("earlier", f"{t.earlier} (none true)"))
    if t.admit is not None:
        rows.append(("admit", "start" if t.admit else "skip"))
    rows += [("consume", place) for place in t.consume]
    if t.args is not None:
        rows.append(("args", f"v{t.args}"))
    if t.writes is not None:
        rows.append(("writes", f"v{t.writes}"))
    rows += [("produce", place) for place in t.produce]
    rows += [("dead", place) for place in t.dead]
    if t.loop is not None:
        items, slots = t.loop
        shown = "items=-" if items is None else _expr(items, exprs)
        rows.append(("loop", f"{shown} slots={slots}"))
    if t.fails_execution:
        rows.append(("fails_execution", ""))
    return rows


# What the control VM records when a transition of each kind fires (vm/control.py,
# vm/routing.py); a transition that enters a step records what its `admit` decides.
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


def recorded_event(t: TransitionInfo, listener: bool) -> str | None:
    """The event the control VM records when this transition fires (None: none of its own)."""
    if t.admit == 1:
        if listener:
            return EventName.STEP_STARTED.value
        return (
            EventName.LOOP_STARTED.value if t.loop is not None else EventName.STEP_SCHEDULED.value
        )
    if t.kind in ("start", "admit"):
        return None  # a listener's `listen` transition: the step's own run was recorded already
    return RECORDED.get(t.kind)


def _block(code: tuple[Any, ...], pos: tuple[int, ...], program: Program) -> list[str]:
    names, exprs, positions = program.names, program.expressions, program.positions
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
        line = positions[pos[pc]].line if pc < len(pos) and pos[pc] < len(positions) else 0
        mark = ">>" if pc in targets else "  "
        if op is None:
            lines.append(f"  {line:>5} {mark}{pc:>3} ??? {list(instruction)!r}")
            continue
        shown = []
        for (name, kind), value in zip(op.operands, instruction[1:]):
            shown.append(_operand(name, kind, value, names, exprs))
        lines.append(f"  {line:>5} {mark}{pc:>3} {op.mnemonic:<14} {' '.join(shown)}".rstrip())
    return lines


def _expr(index: Any, exprs: tuple[Expression, ...]) -> str:
    if isinstance(index, int) and 0 <= index < len(exprs):
        return f"e{index} {exprs[index].source!r}"
    return f"e{index}"


def _operand(
    name: str, kind: str, value: Any, names: tuple[str, ...], exprs: tuple[Expression, ...]
) -> str:
    if value is None:
        return f"{name}=-"
    if kind == "name" and isinstance(value, int) and value < len(names):
        return names[value]
    if kind == "expr":
        return _expr(value, exprs)
    if kind == "value":
        return f"v{value}"
    if kind == "label":
        return f"-> {value}"
    return str(value)
