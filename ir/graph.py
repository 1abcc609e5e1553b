"""Graphs of a compiled playbook: the steps view and the full net view, as DOT or Mermaid.

Steps view: one node per step (final steps doubled, AND-joins as diamonds with their kind),
arcs labelled with their effective guard; failure arcs dashed red, inclusive forks bold.
Net view: places as circles, transitions as boxes labelled with their guard (`when ...`);
dead-path transitions are filled grey boxes with a dashed dark border, their arcs dashed.
"""

from __future__ import annotations

from typing import Any

from noetlc.ir.events import STEP_FAILED
from noetlc.ir.program import Expression, Program, TransitionInfo


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _guard(t: TransitionInfo, exprs: tuple[Expression, ...]) -> str:
    """The source of a transition's own guard, or ''."""
    for expr, negated in t.guards:
        if not negated:
            return exprs[expr].source
    return ""


def _program(program: Program | dict[str, Any]) -> Program:
    return program if isinstance(program, Program) else Program.from_payload(program)


DEAD_DOT = ', style="filled,dashed", fillcolor="#e8e8e8", color="#555555"'


def _steps_edges(program: Program) -> list[tuple[str, str, str, str]]:
    """(source, target, label, style) for every route transition; style: ok|failed."""
    edges = []
    for t in program.control:
        if t.kind != "route" or t.target is None or t.step is None:
            continue
        style = "failed" if list(t.on) == [STEP_FAILED] else "ok"
        edges.append((t.step, t.target, _guard(t, program.expressions), style))
    return edges


def step_edges(program: Program | dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """The steps view's arcs: (source, target, guard source, style ok|failed)."""
    return _steps_edges(_program(program))


def final_steps(program: Program | dict[str, Any]) -> set[str]:
    """Steps no route leaves."""
    return _finals(_program(program))


def to_dot(program: Program | dict[str, Any], level: str = "steps") -> str:
    program = _program(program)
    lines = [
        f'digraph "{_esc(program.metadata.name)}" {{',
        "  rankdir=LR;",
        "  node [fontname=Helvetica];",
    ]
    if level == "net":
        for p in program.places:
            label = p.id + (f"\\ncap {p.capacity}" if p.capacity else "")
            shape = "doublecircle" if p.kind in ("sink", "failure") else "circle"
            lines.append(f'  "{_esc(p.id)}" [shape={shape}, label="{label}"];')
        for t in program.control:
            tid, kind = t.id, t.kind
            style = DEAD_DOT if kind == "dead" else (", style=bold" if kind == "join" else "")
            guard = _guard(t, program.expressions)
            label = f"{_esc(tid)}\\n{kind}" + (f"\\nwhen {_esc(guard)}" if guard else "")
            lines.append(f'  "t:{_esc(tid)}" [shape=box, label="{label}"{style}];')
            for place in t.consume:
                lines.append(f'  "{_esc(place)}" -> "t:{_esc(tid)}";')
            for place, extra in _outputs(t, ' [style=dashed, color="#555555"]'):
                lines.append(f'  "t:{_esc(tid)}" -> "{_esc(place)}"{extra};')
        lines.append("}")
        return "\n".join(lines) + "\n"
    joins = {j.step: j.kind for j in program.joins}
    finals = _finals(program)
    for info in program.steps:
        name = info.name
        if name in joins:
            lines.append(
                f'  "{_esc(name)}" [shape=diamond, label="{_esc(name)}\\njoin {joins[name]}"];'
            )
        elif name in finals:
            lines.append(f'  "{_esc(name)}" [shape=box, peripheries=2];')
        else:
            loop = "\\nloop" if info.loop is not None else ""
            lines.append(f'  "{_esc(name)}" [shape=box, label="{_esc(name)}{loop}"];')
    for source, target, guard, style in _steps_edges(program):
        attrs = [f'label="{_esc(guard)}"'] if guard else []
        if style == "failed":
            attrs.append("style=dashed, color=red")
        lines.append(
            f'  "{_esc(source)}" -> "{_esc(target)}"'
            + (f" [{', '.join(attrs)}]" if attrs else "")
            + ";"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(program: Program | dict[str, Any], level: str = "steps") -> str:
    program = _program(program)

    def node_id(text: str) -> str:
        return "n_" + "".join(c if c.isalnum() else "_" for c in text)

    lines = ["flowchart LR"]
    if level == "net":
        for p in program.places:
            lines.append(f'  {node_id(p.id)}(("{p.id}"))')
        dead = []
        for t in program.control:
            tid, kind = t.id, t.kind
            guard = _guard(t, program.expressions).replace(chr(34), chr(39))
            when = f"<br/>when {guard}" if guard else ""
            lines.append(f'  {node_id("t_" + tid)}["{tid} ({kind}){when}"]')
            if kind == "dead":
                dead.append(node_id("t_" + tid))
            for place in t.consume:
                lines.append(f"  {node_id(place)} --> {node_id('t_' + tid)}")
            for place, arrow in _outputs(t, "-.->", "-->"):
                lines.append(f"  {node_id('t_' + tid)} {arrow} {node_id(place)}")
        if dead:
            lines.append("  classDef dead fill:#e8e8e8,stroke:#555555,stroke-dasharray:5 5")
            lines.append(f"  class {','.join(dead)} dead")
        return "\n".join(lines) + "\n"
    joins = {j.step: j.kind for j in program.joins}
    finals = _finals(program)
    for info in program.steps:
        name = info.name
        if name in joins:
            lines.append(f'  {node_id(name)}{{"{name}<br/>join {joins[name]}"}}')
        elif name in finals:
            lines.append(f'  {node_id(name)}(["{name}"])')
        else:
            lines.append(f'  {node_id(name)}["{name}"]')
    for source, target, guard, style in _steps_edges(program):
        arrow = "-.->" if style == "failed" else "-->"
        label = f'|"{guard.replace(chr(34), chr(39))}"|' if guard else ""
        lines.append(f"  {node_id(source)} {arrow}{label} {node_id(target)}")
    return "\n".join(lines) + "\n"


def _outputs(t: TransitionInfo, dead: str, live: str = "") -> list[tuple[str, str]]:
    """The places a transition feeds, each with `live` or `dead` (its arc's decoration): live
    tokens first, then the dead tokens of a dead path."""
    marks = {place: live for place in t.produce}
    marks.update((place, dead) for place in t.dead)
    return list(marks.items())


def _finals(program: Program) -> set[str]:
    routed = {t.step for t in program.control if t.kind == "route"}
    return {info.name for info in program.steps} - routed
