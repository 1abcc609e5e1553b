"""Deliver a signal to an execution: listener steps (`eval_mode: on_event`) route on it.

    noetl-vm signal EXECUTION_ID NAME [--data JSON] [--db URL]

Arc guards see it as `event.name == 'signal.received'`, `event.data.name` and
`event.data.data`. The signal is stored and picked up by the running process (or by
`noetl-vm resume`).
"""

from __future__ import annotations

import argparse
import json
import sys

from noetlc.cli.vm_commands.history import add_db, find_execution, open_or_report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("execution_id", help="the execution")
    p.add_argument("name", help="the signal's name")
    p.add_argument("--data", default="null", metavar="JSON", help="the signal's data (JSON)")
    add_db(p)


def run(args: argparse.Namespace) -> int:
    try:
        data = json.loads(args.data)
    except (ValueError, RecursionError) as exc:  # not JSON, an integer too long, too deep
        print(f"error[NOE800]: --data is not JSON: {exc}", file=sys.stderr)
        return 2
    store = open_or_report(args.db)
    if store is None:
        return 2
    try:
        if find_execution(store, args.execution_id, args.db, running=True) is None:
            return 1
        request = store.request(args.execution_id, "signal", args.name, data)
        print(f"signal {args.name} sent to {args.execution_id} (request {request})")
    finally:
        store.close()
    return 0
