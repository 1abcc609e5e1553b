"""The step graph of a stored program, as the console draws it (the steps view of
`noetlc graph`): each step with its YAML line, each route arc with its guard and style.

The program is one this service stored (verified when it was compiled and stored), so it is
read from the container (magic, format, checksum: `nbc.decode`) and its typed form built
without `Program.decode`'s verification and expression pool check, which cost seconds for a
10,000-step program and are not needed to draw it; a payload of an unexpected shape is
decoded the verifying way, so a bad one is refused with its NOE70x code like anywhere else."""

from __future__ import annotations

from typing import Any


def step_graph(program: bytes) -> dict[str, Any]:
    from noetlc import FORMAT_VERSION
    from noetlc.ir import nbc
    from noetlc.ir.nbc import BytecodeError
    from noetlc.ir.program import Program

    _header, payload = nbc.decode(bytes(program), format_version=FORMAT_VERSION)
    try:
        image = Program.from_payload(payload)
        return _graph(image)
    except (BytecodeError, KeyError, IndexError, TypeError, ValueError, AttributeError):
        from noetlc.runtime.stored_program import decode_program

        return _graph(decode_program(program))


def _graph(image: Any) -> dict[str, Any]:
    from noetlc.ir.graph import final_steps, step_edges

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
