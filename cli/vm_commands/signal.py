"""Deliver a signal to an execution: listener steps (`eval_mode: on_event`) route on it.

    noetl-vm signal EXECUTION_ID NAME [--data JSON] [--db URL]

EXECUTION_ID may be a unique prefix of the id. Arc guards see the signal under the name it
was sent with (`event.name == 'message.received'`) and its data as `event.data`. It is stored
and picked up by the running process (or by `noetl-vm resume`). An execution that already
ended exits 4.
"""

from __future__ import annotations

import argparse
import json

from noetlc.cli.common import ExecutionStateError, UsageError
from noetlc.cli.vm_commands.history import add_db, find_execution, open_existing


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("execution_id", metavar="ID", help="the execution (its id or a unique prefix)")
    p.add_argument("name", help="the signal's name")
    p.add_argument("--data", default="null", metavar="JSON", help="the signal's data (JSON)")
    add_db(p)


def run(args: argparse.Namespace) -> int:
    try:
        data = json.loads(args.data)
    except (ValueError, RecursionError) as exc:  # not JSON, an integer too long, too deep
        raise UsageError("NOE800", f"--data is not JSON: {exc}") from None
    store = open_existing(args.db)
    try:
        record = find_execution(store, args.execution_id, args.db, running=True)
        execution_id = record["execution_id"]
        request = store.request(execution_id, "signal", args.name, data)
        if not request:  # distributed: the log ended meanwhile
            raise ExecutionStateError(
                "NOE856",
                f"execution {execution_id} already ended",
                f"`noetl-vm status {execution_id}` shows its summary",
            )
        print(f"signal {args.name} sent to {execution_id} (request {request})")
    finally:
        store.close()
    return 0
