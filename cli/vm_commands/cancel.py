"""Cancel a running execution.

    noetl-vm cancel EXECUTION_ID [--now] [--db URL]

EXECUTION_ID may be a unique prefix of the id. The request is stored; the process running the
execution picks it up within a fraction of a second, stops issuing work, asks running tasks to
stop, and ends with status `cancelled` (exit 3). `--now` also marks it cancelled in the store,
for an execution whose process is gone. An execution that already ended exits 4.
"""

from __future__ import annotations

import argparse

from noetlc.cli.vm_commands.history import add_db, find_execution, open_existing


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "execution_id", metavar="ID", help="the execution to cancel (its id or a unique prefix)"
    )
    p.add_argument(
        "--now",
        action="store_true",
        help="also mark it cancelled in the store (when no process runs it any more)",
    )
    add_db(p)


def run(args: argparse.Namespace) -> int:
    store = open_existing(args.db)
    try:
        record = find_execution(store, args.execution_id, args.db, running=True)
        execution_id = record["execution_id"]
        request = store.request(execution_id, "cancel")
        if args.now:
            summary = dict(record.get("summary") or {}, status="cancelled")
            store.finish_execution(execution_id, "cancelled", summary)
        print(f"cancel requested for {execution_id} (request {request})")
    finally:
        store.close()
    return 0
