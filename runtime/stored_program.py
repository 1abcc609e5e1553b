"""How a stored execution keeps its program: the `.nbc` container bytes (`Program.nbc`,
format version and checksums included: the bytes the compiler made, or the ones a decoded
program was read from, never encoded twice), and the first event of a distributed execution,
which carries them. Reading goes through `Program.decode`: a stored program is verified like
a file, and its expressions are compiled from their sources when a VM loads it."""

from __future__ import annotations

import base64
import time
from typing import Any

from noetlc.ir.events import EventName
from noetlc.ir.program import Program
from noetlc.vm.protocol import Event, Source, envelope


def encode_program(program: Program | dict[str, Any]) -> bytes:
    """The container bytes of a program, kept on it (a payload map is read as a program
    first)."""
    if not isinstance(program, Program):
        program = Program.from_payload(program)
    return program.nbc


def decode_program(data: bytes) -> Program:
    """A stored program, verified; `BytecodeError` (NOE70x) when it is not a valid one."""
    return Program.decode(bytes(data))


def requested_event(
    execution_id: str,
    playbook: str,
    program: bytes,
    workload: dict[str, Any],
    parent_id: str | None,
) -> Event:
    """The first event of a distributed execution: what servers and workers read it from."""
    return envelope(
        EventName.EXECUTION_REQUESTED,
        Source.CLIENT,
        event_id=f"{execution_id}:requested",
        parent_id=parent_id,
        ts=time.time(),
        payload={
            "playbook": playbook,
            "workload": workload,
            "program": base64.b64encode(program).decode("ascii"),
        },
    )
