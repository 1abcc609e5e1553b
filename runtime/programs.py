"""How a stored execution keeps its program: the payload as msgpack bytes, and the first event
of a distributed execution, which carries it."""

from __future__ import annotations

import base64
import time
from typing import Any

import msgpack

from noetlc.vm.protocol import Event, EventName, Source, envelope


def encode_program(payload: dict[str, Any]) -> bytes:
    data: bytes = msgpack.packb(payload, use_bin_type=True)
    return data


def decode_program(data: bytes) -> dict[str, Any]:
    payload: dict[str, Any] = msgpack.unpackb(data, raw=False, strict_map_key=False)
    return payload


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
