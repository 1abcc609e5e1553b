"""Start an execution on a running cluster (servers and workers sharing one database).

    noetl-vm submit FILE.yaml|FILE.nbc --db postgresql://... [--set k=v] [--workload FILE]
                    [--wait] [--timeout S] [--json]

Prints the execution id. With `--wait`, waits until it ends and prints the same summary as
`noetl-vm run` (`--json`: the summary line); exit status as `run` (0, 1, 3).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid

from noetlc.cli.vm_commands.run import add_workload, budget_options, report, workload_overrides
from noetlc.cli.vm_commands.server import add_db_required, check_db


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="FILE.yaml or FILE.nbc")
    add_db_required(p)
    add_workload(p)
    p.add_argument("--wait", action="store_true", help="wait for the execution to end")
    p.add_argument("--timeout", type=float, default=None, help="give up waiting after S seconds")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line")


def run(args: argparse.Namespace) -> int:
    from noetlc.cli.noetlc_commands.artifacts import load_payload
    from noetlc.runtime.postgres.store import PostgresStore
    from noetlc.runtime.programs import encode_program
    from noetlc.vm.budgets import with_budgets

    if not check_db(args.db):
        return 2
    overrides = workload_overrides(args)
    budgets = budget_options(args)
    if overrides is None or budgets is None:
        return 2
    payload = load_payload(args.file)
    if payload is None:
        return 1
    payload = with_budgets(payload, budgets)
    store = PostgresStore(args.db)
    try:
        execution_id = str(uuid.uuid4())
        workload = {**(payload["workload"] or {}), **overrides}
        store.create_execution(
            execution_id,
            payload["metadata"]["name"],
            program=encode_program(payload),
            workload=workload,
        )
        store.offer(execution_id)
        if not args.wait:
            print(json.dumps({"execution_id": execution_id}) if args.json else execution_id)
            return 0
        deadline = None if args.timeout is None else time.monotonic() + args.timeout
        seq = 0
        while True:
            record = store.execution(execution_id)
            if record is not None and record["status"] != "running":
                break
            if deadline is not None and time.monotonic() > deadline:
                print(
                    f"error[NOE858]: execution {execution_id} did not end within {args.timeout} s",
                    file=sys.stderr,
                )
                print(
                    "  hint: are `noetl-vm server` and `noetl-vm worker` running on this database?",
                    file=sys.stderr,
                )
                return 1
            seq = int(record["last_seq"]) if record else seq
            store.wait_for_events(execution_id, seq, 1.0)
        result = record["summary"] or {
            "execution_id": execution_id,
            "status": record["status"],
            "steps": {},
            "ctx": {},
            "events": 0,
            "error": None,
        }
    finally:
        store.close()
    return report(result, payload, args.json)
