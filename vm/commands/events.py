"""Print an execution's events in order (one JSON object per line with --json)."""

from __future__ import annotations

import argparse
import json
import sys

from noetlc.vm.commands.history import add_db, open_or_report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("execution_id", help="the execution")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    add_db(p)


def run(args: argparse.Namespace) -> int:
    store = open_or_report(args.db)
    if store is None:
        return 2
    try:
        events = store.read(args.execution_id)
    finally:
        store.close()
    if not events:
        print(
            f"error[NOE804]: no events for execution {args.execution_id!r} in {args.db}",
            file=sys.stderr,
        )
        return 1
    for e in events:
        if args.json:
            print(json.dumps(e, default=str))
        else:
            print(f"{e['seq']:>5}  {e['name']:<24} {e['step'] or '-'}")
    return 0
