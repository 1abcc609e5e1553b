"""Cancel a running execution.

    noetl-vm cancel EXECUTION_ID [--db URL]

The request is stored; the process running the execution picks it up within a fraction of a
second, stops issuing work, asks running tasks to stop, and ends with status `cancelled`
(exit 3). An execution whose process is gone is cancelled at once.
"""

from __future__ import annotations

import argparse

from noetlc.cli.vm_commands.history import add_db, find_execution, open_or_report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("execution_id", help="the execution to cancel")
    p.add_argument(
        "--now",
        action="store_true",
        help="also mark it cancelled in the store (when no process runs it any more)",
    )
    add_db(p)


def run(args: argparse.Namespace) -> int:
    store = open_or_report(args.db)
    if store is None:
        return 2
    try:
        record = find_execution(store, args.execution_id, args.db)
        if record is None:
            return 1
        if record["status"] != "running":
            print(f"execution {args.execution_id} already ended: {record['status']}")
            return 0
        request = store.request(args.execution_id, "cancel")
        if args.now:
            summary = dict(record.get("summary") or {}, status="cancelled")
            store.finish_execution(args.execution_id, "cancelled", summary)
        print(f"cancel requested for {args.execution_id} (request {request})")
    finally:
        store.close()
    return 0
