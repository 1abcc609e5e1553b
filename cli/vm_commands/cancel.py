"""Cancel a running execution.

    noetl-vm cancel EXECUTION_ID [--reason TEXT] [--now] [--db URL]

EXECUTION_ID may be a unique prefix of the id. The request is stored with its reason; the
process running the execution picks it up within a fraction of a second, stops issuing work,
asks running tasks to stop, and ends with status `cancelled` (exit 3): one
`execution.cancelled` event carrying the reason, nothing logged after it (distributed: the
request is logged as `execution.cancel.requested`, and the owning server appends the terminal
event after its own). `--now`, for an execution whose process is gone, ends it here: embedded,
it takes the execution over (refused while a live process owns it, NOE831); distributed, it
appends the terminal event itself (no server may run it any more); either way the row is
marked cancelled. An execution that already ended exits 4.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from noetlc.cli.common import ExecutionStateError
from noetlc.cli.vm_commands.history import add_db, find_execution, open_existing

DEFAULT_REASON = "cancelled with noetl-vm cancel"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "execution_id", metavar="ID", help="the execution to cancel (its id or a unique prefix)"
    )
    p.add_argument(
        "--reason",
        default=DEFAULT_REASON,
        metavar="TEXT",
        help=f"why: recorded in the execution.cancelled event (default: {DEFAULT_REASON!r})",
    )
    p.add_argument(
        "--now",
        action="store_true",
        help="end it here when no process runs it any more (taken over, marked cancelled)",
    )
    add_db(p)


def run(args: argparse.Namespace) -> int:
    store = open_existing(args.db)
    try:
        record = find_execution(store, args.execution_id, args.db, running=True)
        execution_id = record["execution_id"]
        embedded = not args.db.startswith(("postgresql://", "postgres://"))
        if args.now and embedded:
            _cancel_now(store, args.db, record, args.reason)
            print(f"cancelled {execution_id}")
            return 0
        if args.now:  # distributed: for an execution no server runs any more
            if _end_cancelled(store, execution_id, args.reason):
                summary = dict(record.get("summary") or {}, status="cancelled")
                store.finish_execution(execution_id, "cancelled", summary)
                print(f"cancelled {execution_id}")
                return 0
            _ended(execution_id)
        request = store.request(execution_id, "cancel", None, {"reason": args.reason})
        if not request:
            _ended(execution_id)
        print(f"cancel requested for {execution_id} (request {request})")
    finally:
        store.close()
    return 0


def _end_cancelled(store: Any, execution_id: str, reason: str) -> bool:
    """The distributed store's `end_cancelled` (the one terminal event appended here)."""
    from noetlc.runtime.postgres.event_store import PostgresStore

    assert isinstance(store, PostgresStore)
    return store.end_cancelled(execution_id, reason)


def _ended(execution_id: str) -> None:
    """The log ended between the status read and the request (NOE856, exit 4)."""
    raise ExecutionStateError(
        "NOE856",
        f"execution {execution_id} already ended",
        f"`noetl-vm status {execution_id}` shows its summary",
    )


def _cancel_now(store: Any, url: str, record: dict[str, Any], reason: str) -> None:
    """End an embedded execution whose process is gone: own it (a live owner is refused;
    a stopped one is fenced out), append the one terminal event, mark the row."""
    from noetlc.runtime.driver import cancelled
    from noetlc.runtime.logcheck import terminal_status
    from noetlc.runtime.ownership import ExecutionLease

    execution_id = record["execution_id"]
    ended = terminal_status(store.read(execution_id))
    if ended is not None:
        raise ExecutionStateError(
            "NOE856",
            f"execution {execution_id} already ended in its log ({ended}); its row lags",
            f"`noetl-vm resume {execution_id}` records its summary",
        )
    lease = ExecutionLease.for_url(url, execution_id)
    if lease is not None:
        lease.claim()
        lease.fence(store)
    try:
        store.append(execution_id, [cancelled(f"{execution_id}:cancel:{uuid.uuid4()}", reason)])
        summary = dict(record.get("summary") or {}, execution_id=execution_id)
        summary.update(
            status="cancelled",
            error={"code": "NOE855", "message": "the execution was cancelled", "step": None},
        )
        store.finish_execution(execution_id, "cancelled", summary)
    finally:
        if lease is not None:
            lease.release()
