"""Pass `assemble`: pools, programs and the debug map -> the `.nbc` bytes (`ir/nbc.py`).

Everything a VM needs to run the playbook without its YAML is in the payload: metadata, the
workload defaults, keychain declarations, the executor spec, per-step facts (loop, join kind,
listener), the expression and value pools, the decisions' guard lists (what
`GUARD_NOT_ANY` counts into), the name pool, the control and pipeline programs
and the position table. The output is deterministic: lists only, maps built in a fixed order.
"""

from __future__ import annotations

from typing import Any

from noetlc import FORMAT_VERSION, __version__
from noetlc.compiler.unit import CompilationUnit
from noetlc.ir import nbc


def run(unit: CompilationUnit) -> None:
    programs, net, pool, values = unit.programs, unit.net, unit.pool, unit.values
    playbook = unit.playbook
    if programs is None or net is None or pool is None or values is None or playbook is None:
        return
    steps: list[dict[str, Any]] = []
    for step in playbook.workflow:
        info: dict[str, Any] = {"name": step.name, "tasks": [t.name for t in step.tasks]}
        if step.loop is not None:
            info["loop"] = {
                "iterator": step.loop.iterator,
                "mode": step.loop.mode,
                "max_in_flight": step.loop.max_in_flight,
                "failure_mode": step.loop.failure_mode,
            }
        if step.listener is not None:
            info["listener"] = {"timeout": step.listener.timeout}
        steps.append(info)
    payload: dict[str, Any] = {
        "metadata": {
            "name": playbook.metadata.name,
            "path": playbook.metadata.path,
            "version": playbook.metadata.version,
        },
        "entry": playbook.entry,
        "workload": playbook.workload.to_python(),
        "keychain": [
            {"name": k.name, "kind": k.kind, **k.fields.to_python()} for k in playbook.keychain
        ],
        "executor_spec": playbook.executor_spec.to_python() if playbook.executor_spec else None,
        "steps": steps,
        "names": programs.names,
        "expressions": pool.to_data(),
        "values": values.to_data(),
        "places": [[p.id, p.kind, p.step, p.capacity] for p in net.places],
        "joins": [[j.step, j.kind, j.fork, list(j.branches)] for j in net.joins],
        "decisions": [[d.place, list(d.guards)] for d in net.decisions],
        "control": [
            [t.id, t.kind, t.step, t.target, block.code, block.positions]
            for t, block in zip(net.transitions, programs.control)
        ],
        "pipelines": [[block.name, block.code, block.positions] for block in programs.pipelines],
        "positions": [[p.file, p.line, p.column, p.path] for p in programs.positions],
        "workbook": programs.workbook,
    }
    unit.payload = payload
    unit.nbc = nbc.encode(
        payload,
        format_version=FORMAT_VERSION,
        compiler_version=__version__,
        source=unit.source.encode("utf-8"),
    )
