"""Print an execution's events in order (one JSON object per line with --json).

    noetl-vm events EXECUTION_ID [--follow] [--json] [--db URL]

`--follow` keeps printing new events until the execution ends.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from noetlc.cli.vm_commands.history import add_db, find_execution, open_or_report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("execution_id", help="the execution")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--follow", "-f", action="store_true", help="wait for new events")
    add_db(p)


def _line(e: dict[str, Any]) -> str:
    where = e.get("step") or "-"
    if e.get("iteration") is not None:
        where += f"[{e['iteration']}]"
    task = (e.get("payload") or {}).get("task")
    if task:
        where += f".{task}"
    return f"{e['seq']:>5}  {e.get('source') or '-':<6} {e['name']:<24} {where}"


def run(args: argparse.Namespace) -> int:
    store = open_or_report(args.db)
    if store is None:
        return 2
    try:
        if find_execution(store, args.execution_id, args.db) is None:
            return 1
        seq = 0
        while True:
            for e in store.read(args.execution_id, after_seq=seq):
                seq = e["seq"]
                print(json.dumps(e, default=str) if args.json else _line(e), flush=True)
            if not args.follow:
                break
            record = store.execution(args.execution_id)
            if record is not None and record["status"] != "running":
                for e in store.read(args.execution_id, after_seq=seq):
                    print(json.dumps(e, default=str) if args.json else _line(e), flush=True)
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        return 0
    finally:
        store.close()
    return 0
