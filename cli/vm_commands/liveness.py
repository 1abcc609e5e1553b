"""Whether an embedded execution that the store says is running still has a live process.

`run` and `resume` hold an ownership lease in the SQLite store (runtime/ownership.py). When
that process died (killed, the machine restarted), the store still says `running`; `status`
shows such an execution as `interrupted` with the `noetl-vm resume ID` that finishes it.
PostgreSQL executions are owned by servers, which take over on their own: nothing to show.
"""

from __future__ import annotations

import time
from typing import Any

INTERRUPTED = "interrupted"


def interrupted_owner(url: str, record: dict[str, Any]) -> dict[str, Any] | None:
    """The dead owner ({pid, host}) of a `running` execution of a SQLite store, else None."""
    if record.get("status") != "running" or not url.startswith("sqlite:///"):
        return None
    import sqlite3

    from noetlc.runtime.ownership import DEFAULT_TTL, ExecutionLease

    lease = ExecutionLease.for_url(url, str(record["execution_id"]))
    if lease is None:
        return None
    try:
        owner = lease.owner()
    except sqlite3.Error:
        return None
    if owner is None or owner.alive(DEFAULT_TTL, time.time()):
        return None
    return {"pid": owner.pid, "host": owner.host}


def resume_hint(execution_id: str) -> str:
    return f"its process is gone: `noetl-vm resume {execution_id}` finishes it"
