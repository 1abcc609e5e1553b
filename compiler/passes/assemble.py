"""Pass `assemble`: pools, programs and the debug map -> a `Program` (`ir/program.py`); its
payload and `.nbc` bytes are made from it when first asked for (`Program.payload`, `.nbc`).

Everything a VM needs to run the playbook without its YAML is in the payload: metadata, the
workload defaults, keychain declarations, the executor spec, per-step facts (loop, join kind,
listener), the expression and value pools, the decisions' guard lists (what a transition's
`earlier` counts into), the name pool, the control program (transition records) and the
pipeline programs, and the position table. The expression pool keeps sources and the SHA-256 of their generated
code, never the code (loading compiles the sources again). The output is deterministic:
lists only, maps built in a fixed order.
"""

from __future__ import annotations

import hashlib

from noetlc.compiler.unit import CompilationUnit
from noetlc.diagnostics.report import NO_SPAN
from noetlc.ir.program import (
    DebugPosition,
    DecisionInfo,
    Expression,
    JoinInfo,
    Metadata,
    PipelineBlock,
    PlaceInfo,
    Program,
    StepFacts,
    WorkbookTask,
)


def run(unit: CompilationUnit) -> None:
    programs, net, pool, values = unit.programs, unit.net, unit.pool, unit.values
    playbook = unit.playbook
    if programs is None or net is None or pool is None or values is None or playbook is None:
        return
    steps = []
    for step in playbook.workflow:
        loop = None
        if step.loop is not None:
            loop = {
                "iterator": step.loop.iterator,
                "mode": step.loop.mode,
                "max_in_flight": step.loop.max_in_flight,
                "failure_mode": step.loop.failure_mode,
            }
            stop = pool.by_path.get(("workflow", step.name, "loop", "stop_when"))
            if stop is not None:
                loop["stop_when"] = stop
            slots = pool.by_path.get(("workflow", step.name, "loop", "max_in_flight"))
            if slots is not None:
                loop["max_in_flight_from"] = slots
        listener = None if step.listener is None else {"timeout": step.listener.timeout}
        steps.append(StepFacts(step.name, tuple(t.name for t in step.tasks), loop, listener))
    program = Program(
        metadata=Metadata(
            playbook.metadata.name, playbook.metadata.path, playbook.metadata.version
        ),
        entry=playbook.entry,
        workload=playbook.workload.to_python() or {},
        keychain=tuple(
            {"name": k.name, "kind": k.kind, **k.fields.to_python()} for k in playbook.keychain
        ),
        executor_spec=playbook.executor_spec.to_python() if playbook.executor_spec else None,
        steps=tuple(steps),
        names=tuple(programs.names),
        expressions=tuple(
            Expression(
                e.kind,
                e.source,
                e.mode,
                e.code_sha256,
                e.value if e.kind == "const" else None,
                str(e.span) if e.span != NO_SPAN else None,
            )
            for e in pool.entries
        ),
        values=tuple(values.to_data()),
        places=tuple(PlaceInfo(p.id, p.kind, p.step, p.capacity) for p in net.places),
        joins=tuple(JoinInfo(j.step, j.kind, j.fork, tuple(j.branches)) for j in net.joins),
        decisions=tuple(DecisionInfo(d.place, tuple(d.guards)) for d in net.decisions),
        control=tuple(programs.control),
        pipelines=tuple(
            PipelineBlock(block.name, tuple(tuple(i) for i in block.code), tuple(block.positions))
            for block in programs.pipelines
        ),
        positions=tuple(
            DebugPosition(p.file, p.line, p.column, p.path) for p in programs.positions
        ),
        workbook=tuple(WorkbookTask(*task) for task in programs.workbook),
        source_sha256=hashlib.sha256(unit.source.encode("utf-8")).hexdigest(),
    )
    unit.program = program  # its payload and bytes are made when first asked for
