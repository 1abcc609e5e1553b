"""Replay an execution's event log through a fresh control VM and check it reproduces the log,
then check the log's invariants (runtime/logcheck.py).

    noetl-vm replay EXECUTION_ID [--db URL] [--json]
    noetl-vm replay --all [--db URL] [--json]

EXECUTION_ID may be a unique prefix of the id. `--all` checks every execution of the store.
Exit status: 0 when every recorded server event is reproduced in order and the log keeps its
invariants (one terminal event and nothing after it, each action ended at most once, seq
gap-free, every result after its start, children ended with their parents, the row agreeing
with the log); 1 at the first divergence or on a violation (both printed).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from noetlc.cli.common import UsageError
from noetlc.cli.vm_commands.history import add_db, find_execution, open_existing


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("execution_id", metavar="ID", nargs="?", help="the execution to replay")
    p.add_argument("--all", action="store_true", help="replay and check every execution")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_db(p)


def run(args: argparse.Namespace) -> int:
    if args.all == (args.execution_id is not None):
        raise UsageError(
            "NOE800",
            "give an execution id or --all (not both)",
            "`noetl-vm replay ID` checks one execution, `noetl-vm replay --all` every one",
        )
    store = open_existing(args.db)
    try:
        if not args.all:
            record = find_execution(store, args.execution_id, args.db, program=True)
            out = _one(store, record)
            _print(out, args.json)
            return 0 if out["ok"] and not out["violations"] else 1
        records = store.executions()
        failed = 0
        for listed in records:
            record = store.execution(str(listed["execution_id"])) or listed
            out = _one(store, record)
            failed += not (out["ok"] and not out["violations"])
            _print(out, args.json, brief=True)
        if not args.json:
            print(f"replay --all: {len(records) - failed} of {len(records)} executions ok")
        return 1 if failed else 0
    finally:
        store.close()


def _one(store: Any, record: dict[str, Any]) -> dict[str, Any]:
    from noetlc.runtime.logcheck import check_execution
    from noetlc.runtime.replay import check
    from noetlc.runtime.stored_program import decode_program
    from noetlc.vm.loaded_program import LoadedProgram

    execution_id = record["execution_id"]
    events = store.read(execution_id)
    found = [str(v) for v in check_execution(store, record)]
    out: dict[str, Any] = {
        "execution_id": execution_id,
        "events": len(events),
        "recorded_status": record["status"],
        "violations": found,
    }
    if record.get("program") is None:
        # nothing to replay (an older store): the invariants are still checked
        out.update(ok=False, divergence={"error": "recorded without its program (NOE857)"})
        out.update(inputs=0, compared=0, status=None)
        return out
    # results stored by reference are read from the store, as the run read them
    report = check(
        LoadedProgram(decode_program(record["program"])),
        execution_id,
        record.get("workload") or {},
        events,
        store,
    )
    out.update(
        ok=report.ok,
        inputs=report.inputs,
        compared=report.compared,
        status=report.vm.status,
        divergence=report.divergence,
    )
    return out


def _print(out: dict[str, Any], as_json: bool, brief: bool = False) -> None:
    if as_json:
        print(json.dumps(out, default=str))
        return
    execution_id = out["execution_id"]
    d = out.get("divergence")
    if out["ok"]:
        print(
            f"replay {execution_id}: ok — {out['inputs']} input events reproduce all"
            f" {out['compared']} server events (status {out['status']})"
        )
    elif d and "error" in d:
        print(f"replay {execution_id}: cannot replay: {d['error']}")
    else:
        d = d or {}
        print(
            f"replay {execution_id}: DIVERGES at server event {d.get('index')} (seq {d.get('seq')})"
        )
        if not brief:
            print(f"  recorded: {json.dumps(d.get('recorded'), default=str)}")
            print(f"  replayed: {json.dumps(d.get('replayed'), default=str)}")
    violations = out["violations"]
    if violations:
        print(f"  {len(violations)} invariant violation(s):")
        for text in violations[:20]:
            print(f"    {text}")
        if len(violations) > 20:
            print(f"    ... and {len(violations) - 20} more")
