"""Graphs of a compiled playbook: the steps view and the full net view, as DOT or Mermaid.

Steps view: one node per step (final steps doubled, AND-joins as diamonds with their kind),
arcs labelled with their effective guard; failure arcs dashed red, inclusive forks bold.
Net view: places as circles, transitions as boxes labelled with their guard (`when ...`);
dead-path transitions are filled grey boxes with a dashed dark border, their arcs dashed.
"""

from __future__ import annotations

from typing import Any

from noetlc.ir.events import STEP_FAILED
from noetlc.ir.opcodes import BY_MNEMONIC

ON = BY_MNEMONIC["ON"].code
GUARD = BY_MNEMONIC["GUARD"].code
CONSUME = BY_MNEMONIC["CONSUME"].code
PRODUCE = BY_MNEMONIC["PRODUCE"].code
DEAD = BY_MNEMONIC["DEAD"].code


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _guard(code: list[Any], exprs: list[Any]) -> str:
    """The source of a transition's guard, or ''."""
    for instruction in code:
        if instruction[0] == GUARD and instruction[1] is not None:
            return str(exprs[instruction[1]].get("source", ""))
    return ""


DEAD_DOT = ', style="filled,dashed", fillcolor="#e8e8e8", color="#555555"'


def _steps_edges(payload: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(source, target, label, style) for every route transition; style: ok|failed|dead."""
    exprs = payload["expressions"]
    names = payload["names"]
    edges = []
    for _tid, kind, step, target, code, _ in payload["control"]:
        if kind not in ("route", "dead") or target is None:
            continue
        guard = _guard(code, exprs)
        events = []
        for instruction in code:
            if instruction[0] == ON:
                events.append(names[instruction[1]])
        style = "dead" if kind == "dead" else ("failed" if events == [STEP_FAILED] else "ok")
        if kind == "dead":
            continue
        edges.append((step, target, guard, style))
    return edges


def step_edges(payload: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """The steps view's arcs: (source, target, guard source, style ok|failed)."""
    return _steps_edges(payload)


def final_steps(payload: dict[str, Any]) -> set[str]:
    """Steps no route leaves."""
    return _finals(payload)


def to_dot(payload: dict[str, Any], level: str = "steps") -> str:
    lines = [
        f'digraph "{_esc(payload["metadata"]["name"])}" {{',
        "  rankdir=LR;",
        "  node [fontname=Helvetica];",
    ]
    if level == "net":
        for pid, kind, _step, capacity in payload["places"]:
            label = pid + (f"\\ncap {capacity}" if capacity else "")
            shape = "doublecircle" if kind in ("sink", "failure") else "circle"
            lines.append(f'  "{_esc(pid)}" [shape={shape}, label="{label}"];')
        exprs = payload["expressions"]
        for tid, kind, _step, _target, code, _ in payload["control"]:
            style = DEAD_DOT if kind == "dead" else (", style=bold" if kind == "join" else "")
            guard = _guard(code, exprs)
            label = f"{_esc(tid)}\\n{kind}" + (f"\\nwhen {_esc(guard)}" if guard else "")
            lines.append(f'  "t:{_esc(tid)}" [shape=box, label="{label}"{style}];')
            for instruction in code:
                if instruction[0] == CONSUME:
                    lines.append(f'  "{_esc(instruction[1])}" -> "t:{_esc(tid)}";')
                elif instruction[0] in (PRODUCE, DEAD):
                    extra = ' [style=dashed, color="#555555"]' if instruction[0] == DEAD else ""
                    lines.append(f'  "t:{_esc(tid)}" -> "{_esc(instruction[1])}"{extra};')
        lines.append("}")
        return "\n".join(lines) + "\n"
    joins = {j[0]: j[1] for j in payload["joins"]}
    finals = _finals(payload)
    for info in payload["steps"]:
        name = info["name"]
        if name in joins:
            lines.append(
                f'  "{_esc(name)}" [shape=diamond, label="{_esc(name)}\\njoin {joins[name]}"];'
            )
        elif name in finals:
            lines.append(f'  "{_esc(name)}" [shape=box, peripheries=2];')
        else:
            loop = "\\nloop" if "loop" in info else ""
            lines.append(f'  "{_esc(name)}" [shape=box, label="{_esc(name)}{loop}"];')
    for source, target, guard, style in _steps_edges(payload):
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


def to_mermaid(payload: dict[str, Any], level: str = "steps") -> str:
    def node_id(text: str) -> str:
        return "n_" + "".join(c if c.isalnum() else "_" for c in text)

    lines = ["flowchart LR"]
    if level == "net":
        for pid, _kind, _step, _capacity in payload["places"]:
            lines.append(f'  {node_id(pid)}(("{pid}"))')
        exprs = payload["expressions"]
        dead = []
        for tid, kind, _step, _target, code, _ in payload["control"]:
            guard = _guard(code, exprs).replace(chr(34), chr(39))
            when = f"<br/>when {guard}" if guard else ""
            lines.append(f'  {node_id("t_" + tid)}["{tid} ({kind}){when}"]')
            if kind == "dead":
                dead.append(node_id("t_" + tid))
            for instruction in code:
                if instruction[0] == CONSUME:
                    lines.append(f"  {node_id(instruction[1])} --> {node_id('t_' + tid)}")
                elif instruction[0] == PRODUCE:
                    lines.append(f"  {node_id('t_' + tid)} --> {node_id(instruction[1])}")
                elif instruction[0] == DEAD:
                    lines.append(f"  {node_id('t_' + tid)} -.-> {node_id(instruction[1])}")
        if dead:
            lines.append("  classDef dead fill:#e8e8e8,stroke:#555555,stroke-dasharray:5 5")
            lines.append(f"  class {','.join(dead)} dead")
        return "\n".join(lines) + "\n"
    joins = {j[0]: j[1] for j in payload["joins"]}
    finals = _finals(payload)
    for info in payload["steps"]:
        name = info["name"]
        if name in joins:
            lines.append(f'  {node_id(name)}{{"{name}<br/>join {joins[name]}"}}')
        elif name in finals:
            lines.append(f'  {node_id(name)}(["{name}"])')
        else:
            lines.append(f'  {node_id(name)}["{name}"]')
    for source, target, guard, style in _steps_edges(payload):
        arrow = "-.->" if style == "failed" else "-->"
        label = f'|"{guard.replace(chr(34), chr(39))}"|' if guard else ""
        lines.append(f"  {node_id(source)} {arrow}{label} {node_id(target)}")
    return "\n".join(lines) + "\n"


def _finals(payload: dict[str, Any]) -> set[str]:
    routed = {step for _tid, kind, step, _t, _c, _p in payload["control"] if kind == "route"}
    return {info["name"] for info in payload["steps"]} - routed
