"""The outcome envelope every tool returns (`status`, `result`, `error`, `meta`; docs/tools.md), and JSON-safe conversion of results.

`{"status": "ok"|"error", "result": ..., "error": {"type", "message", ...} | None,
"meta": {...}}` plus per-kind fields (`http`, `pg`, `py`, `shell`). Tools build outcomes with
`ok`/`error` and never raise: `registry.call_tool` turns anything unexpected into an error
outcome too.
"""

from __future__ import annotations

import base64
import datetime as dt
import sys
import uuid
from collections.abc import Mapping
from typing import Any


def ok(result: Any, **extra: Any) -> dict[str, Any]:
    return {"status": "ok", "result": result, "error": None, **extra}


def error(type_: str, message: str, *, result: Any = None, **fields: Any) -> dict[str, Any]:
    """An error outcome; `fields` go into the error object (`retryable`, `kind`, `hint`...)."""
    body: dict[str, Any] = {"type": type_, "message": message}
    body.update({k: v for k, v in fields.items() if v is not None})
    return {"status": "error", "result": result, "error": body}


def jsonable(value: Any) -> Any:
    """Database values -> JSON-like data: results are stored in events and compared as JSON."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    # a Decimal comes from a driver that imported `decimal`; a process without it has none
    # (and a cold `noetl-vm run` need not import it)
    decimal = sys.modules.get("decimal")
    if decimal is not None and isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)
