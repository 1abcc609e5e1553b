"""What the distributed processes (runtime/server.py, runtime/worker.py) share: their owner
names, the database errors they retry a round after, and how they say so."""

from __future__ import annotations

import os
import sys
import uuid

from noetlc.runtime.ownership import hostname
from noetlc.runtime.postgres.connect import TRANSIENT
from noetlc.runtime.postgres.errors import DatabaseError

# a round that failed with one of these is tried again (the database went away meanwhile)
RETRYABLE: tuple[type[BaseException], ...] = (DatabaseError, *TRANSIENT)


def new_owner(kind: str) -> str:
    """A process's lease owner name: kind, host, pid and a random suffix."""
    return f"{kind}-{hostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def warn_retrying(owner: str, exc: BaseException) -> None:
    print(f"{owner}: database error, retrying: {type(exc).__name__}: {exc}", file=sys.stderr)


__all__ = ["RETRYABLE", "new_owner", "warn_retrying"]
