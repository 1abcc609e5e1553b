"""What a task printed, as text a store and a page can hold: one rule for the task log
(runtime/logs.py) and the `py.stdout` / `py.stderr` of an outcome (isolation.py)."""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f]")


def clean(text: Any) -> str:
    """`text` as storable, printable text: bytes decoded (bad bytes escaped), surrogates
    and control characters escaped (`\\r` kept: progress bars)."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", "backslashreplace")
    elif not isinstance(text, str):
        text = str(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:  # bytes smuggled as surrogates (surrogateescape): escape them as bytes
            text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
