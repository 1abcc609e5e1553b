"""Replay an execution's event log through a fresh control VM and check it reproduces the log.

    noetl-vm replay EXECUTION_ID [--db URL] [--json]

EXECUTION_ID may be a unique prefix of the id.
Exit status: 0 when every recorded server event is reproduced in order, 1 at the first
divergence (printed with both versions).
"""

from __future__ import annotations

import argparse
import json

from noetlc.cli.vm_commands.history import add_db, find_execution, open_existing


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("execution_id", metavar="ID", help="the execution to replay")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_db(p)


def run(args: argparse.Namespace) -> int:
    from noetlc.runtime.programs import decode_program
    from noetlc.runtime.replay import check
    from noetlc.vm.program import Program

    store = open_existing(args.db)
    try:
        record = find_execution(store, args.execution_id, args.db, program=True)
        execution_id = record["execution_id"]
        events = store.read(execution_id)
        # results stored by reference are read from the store, as the run read them
        report = check(
            Program(decode_program(record["program"])),
            execution_id,
            record.get("workload") or {},
            events,
            store,
        )
    finally:
        store.close()
    out = {
        "execution_id": execution_id,
        "ok": report.ok,
        "events": len(events),
        "inputs": report.inputs,
        "compared": report.compared,
        "status": report.vm.status,
        "recorded_status": record["status"],
        "divergence": report.divergence,
    }
    if args.json:
        print(json.dumps(out, default=str))
    elif report.ok:
        print(
            f"replay {execution_id}: ok — {report.inputs} input events reproduce all"
            f" {report.compared} server events (status {report.vm.status})"
        )
    else:
        d = report.divergence or {}
        print(
            f"replay {execution_id}: DIVERGES at server event {d.get('index')} (seq {d.get('seq')})"
        )
        print(f"  recorded: {json.dumps(d.get('recorded'), default=str)}")
        print(f"  replayed: {json.dumps(d.get('replayed'), default=str)}")
    return 0 if report.ok else 1
