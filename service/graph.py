"""The step graph of a stored program, as the console draws it (the steps view of
`noetlc graph`): each step with its YAML line, each route arc with its guard and style."""

from __future__ import annotations

from typing import Any


def step_graph(program: bytes) -> dict[str, Any]:
    from noetlc.ir.graph import final_steps, step_edges
    from noetlc.runtime.stored_program import decode_program

    image = decode_program(program)
    steps = []
    finals = final_steps(image)
    for facts in image.steps:
        where = image.position_of(facts.name)
        steps.append(
            {
                "name": facts.name,
                "line": None if where is None else where.line,
                "column": None if where is None else where.column,
                "final": facts.name in finals,
                "entry": facts.name == image.entry,
                "loop": bool(facts.loop),
                "listener": facts.listener is not None,
                "tasks": len(facts.tasks),
            }
        )
    edges = [
        {"source": s, "target": t, "guard": g, "style": style}
        for s, t, g, style in step_edges(image)
    ]
    return {"name": image.metadata.name, "steps": steps, "edges": edges}
