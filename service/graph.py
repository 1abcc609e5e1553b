"""The step graph of a stored program, as the console draws it (the steps view of
`noetlc graph`): each step with its YAML line, each route arc with its guard and style.

The program is one this service stored (verified when it was compiled and stored), so its
payload is read from the container alone (magic, format, checksum: `nbc.decode`) without
`Program.decode`'s verification and expression pool check, which cost seconds for a 10,000-
step program and are not needed to draw it; a payload of an unexpected shape is decoded the
verifying way, so a bad one is refused with its NOE70x code like anywhere else."""

from __future__ import annotations

from typing import Any


def step_graph(program: bytes) -> dict[str, Any]:
    from noetlc import FORMAT_VERSION
    from noetlc.ir import nbc

    _header, payload = nbc.decode(bytes(program), format_version=FORMAT_VERSION)
    try:
        return _graph(payload)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        from noetlc.runtime.stored_program import decode_program

        return _graph(decode_program(program).to_payload())


def _graph(payload: dict[str, Any]) -> dict[str, Any]:
    from noetlc.ir.graph import final_steps, step_edges

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
