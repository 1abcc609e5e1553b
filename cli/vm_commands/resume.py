"""Finish an execution whose process died (killed, crashed, or interrupted).

    noetl-vm resume EXECUTION_ID [--db URL] [--json]

EXECUTION_ID may be a unique prefix of the id. The control VM is rebuilt from the event log;
the steps and iterations that were started and never answered run again, and tasks whose
outcome is in the log are not called again (their recorded outcomes are replayed). An
execution whose process is still alive is refused, naming its pid and host (exit 4); one whose
process is gone is taken over. Distributed executions are not resumed here: the servers take
over those of a server that died. Exit status as `run`: 0 completed, 1 failed, 3 cancelled.
"""

from __future__ import annotations

import argparse

from noetlc.cli.common import ExecutionStateError
from noetlc.cli.vm_commands.history import add_db, find_execution, open_existing
from noetlc.cli.vm_commands.run import add_keychain, check_keychain_file, progress_for, report


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "execution_id", metavar="ID", help="the execution to finish (its id or a unique prefix)"
    )
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    add_keychain(p)
    add_db(p)


def run(args: argparse.Namespace) -> int:
    from noetlc.runtime.embedded import resume_embedded
    from noetlc.runtime.ownership import ExecutionLease
    from noetlc.runtime.stored_program import decode_program

    check_keychain_file(args.keychain)
    store = open_existing(args.db)
    lease = None
    try:
        record = find_execution(store, args.execution_id, args.db, running=True, program=True)
        execution_id = record["execution_id"]
        if args.db.startswith(("postgresql://", "postgres://")):
            raise ExecutionStateError(
                "NOE831",
                f"execution {execution_id} runs in distributed mode: the servers on this"
                " database own it",
                "a running `noetl-vm server` takes over the executions of a server that died",
            )
        lease = ExecutionLease.for_url(args.db, execution_id)
        if lease is not None:
            lease.claim()  # refuses a live owner
            lease.fence(store)
        program = decode_program(record["program"])
        progress = progress_for(args, len(program.steps))
        try:
            result = resume_embedded(
                store, execution_id, on_events=progress, keychain_file=args.keychain
            )
        finally:
            if progress is not None:
                progress.close()
    finally:
        if lease is not None:
            lease.release()
        store.close()
    return report(result, program, args.json)
