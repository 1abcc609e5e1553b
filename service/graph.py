"""The step graph of a stored program, as the console draws it (the steps view of
`noetlc graph`): each step with its YAML line, each route arc with its guard and style."""

from __future__ import annotations

from typing import Any


def step_graph(program: bytes) -> dict[str, Any]:
    from noetlc.ir.graph import final_steps, step_edges
    from noetlc.runtime.stored_program import decode_program

    payload = decode_program(program).to_payload()
    where: dict[str, tuple[int, int]] = {}
    for _file, line, column, path in payload.get("positions", []):
        where.setdefault(path, (line, column))
    steps = []
    finals = final_steps(payload)
    for index, info in enumerate(payload["steps"]):
        line, column = where.get(f"workflow[{index}]", (None, None))
        steps.append(
            {
                "name": info["name"],
                "line": line,
                "column": column,
                "final": info["name"] in finals,
                "entry": info["name"] == payload.get("entry"),
                "loop": bool(info.get("loop")),
                "listener": bool(info.get("listener")),
                "tasks": len(info.get("tasks") or ()),
            }
        )
    edges = [
        {"source": s, "target": t, "guard": g, "style": style}
        for s, t, g, style in step_edges(payload)
    ]
    return {"name": payload["metadata"].get("name"), "steps": steps, "edges": edges}
