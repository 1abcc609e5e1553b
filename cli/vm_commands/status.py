"""Show executions recorded in the event store: all of them, or one by id (with --json)."""

from __future__ import annotations

import argparse
import json
import sys

from noetlc.cli.vm_commands.history import add_db, open_or_report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("execution_id", nargs="?", help="one execution (default: list all)")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_db(p)


def run(args: argparse.Namespace) -> int:
    store = open_or_report(args.db)
    if store is None:
        return 2
    try:
        rows = store.executions()
    finally:
        store.close()
    if args.execution_id:
        rows = [r for r in rows if r["execution_id"] == args.execution_id]
        if not rows:
            print(
                f"error[NOE804]: no execution {args.execution_id!r} in {args.db}", file=sys.stderr
            )
            return 1
    if args.json:
        print(json.dumps(rows, default=str))
    else:
        for r in rows:
            print(f"{r['execution_id']}  {r['status']:<9}  {r['playbook']}")
    return 0
