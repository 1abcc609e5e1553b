"""Start an execution on a running cluster (servers and workers sharing one database).

    noetl-vm submit FILE.yaml|FILE.nbc --db postgresql://... [--set k=v] [--workload FILE]
                    [--wait] [--timeout S] [--json]

Prints the execution id. With `--wait`, the id is printed on standard error at once (on a
terminal, with a live progress line), and the command waits until the execution ends and
prints the same summary as `noetl-vm run` (`--json`: the summary line, which holds the id);
exit status as `run` (0, 1, 3). A wait that times out exits 1 (NOE832).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from noetlc.cli.common import EXIT_ERRORS, EXIT_OK, UsageError
from noetlc.cli.vm_commands.run import (
    add_workload,
    announce,
    budget_options,
    progress_for,
    report,
    warn_undeclared,
    workload_overrides,
)
from noetlc.cli.vm_commands.server import add_db_required, check_db
from noetlc.runtime.ids import snowflake

# seconds between two looks at a running execution's status (`--wait` without progress)
WAKE_GAP = 0.01


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="FILE.yaml or FILE.nbc")
    add_db_required(p)
    add_workload(p)
    p.add_argument("--wait", action="store_true", help="wait for the execution to end")
    p.add_argument(
        "--timeout", type=float, default=None, metavar="S", help="give up waiting after S seconds"
    )
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the compile cache (also NOETLC_NO_CACHE=1)",
    )


def run(args: argparse.Namespace) -> int:
    from noetlc.cli.noetlc_commands.artifacts import load_program
    from noetlc.runtime.postgres.event_store import PostgresStore
    from noetlc.vm.budgets import spec_with_budgets
    from noetlc.vm.protocol import Event

    check_db(args.db)
    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(
            "NOE800", f"--timeout must be a positive number of seconds, not {args.timeout:g}"
        )
    if args.timeout is not None and not args.wait:
        raise UsageError("NOE800", "--timeout is the limit of --wait; add --wait")
    overrides = workload_overrides(args)
    budgets = budget_options(args)
    from noetlc.cli import compile_cache

    program = load_program(args.file, compile_cache.enabled(args.no_cache))
    if program is None:
        return EXIT_ERRORS
    warn_undeclared(overrides, program.workload)
    if budgets:
        program = program.with_executor_spec(spec_with_budgets(program.executor_spec, budgets))
    store = PostgresStore(args.db)
    try:
        execution_id = snowflake()
        workload = {**program.workload, **overrides}
        store.create_execution(
            execution_id,
            program.metadata.name,
            program=program.nbc,  # the compiler's (or the file's) bytes, encoded once
            workload=workload,
        )
        store.offer(execution_id)
        if not args.wait:
            print(json.dumps({"execution_id": execution_id}) if args.json else execution_id)
            return EXIT_OK
        announce(execution_id, args.json)
        progress = progress_for(args, len(program.steps))
        deadline = None if args.timeout is None else time.monotonic() + args.timeout
        seq = 0
        try:
            while True:
                if progress is not None:
                    batch = store.read(execution_id, after_seq=seq)
                    if batch:
                        seq = int(batch[-1]["seq"])
                        progress([Event.from_record(r) for r in batch])
                # the row only: woken by every commit of the execution, this loop must not
                # decode its program (the first event) each time
                record = store.state(execution_id)
                if record is not None and record["status"] != "running":
                    break
                if deadline is not None and time.monotonic() > deadline:
                    print(
                        f"error[NOE832]: execution {execution_id} did not end within"
                        f" {args.timeout:g} s",
                        file=sys.stderr,
                    )
                    print(
                        "  hint: are `noetl-vm server` and `noetl-vm worker` running on this"
                        f" database? `noetl-vm status {execution_id} --db URL` shows it later",
                        file=sys.stderr,
                    )
                    return EXIT_ERRORS
                if progress is None and record is not None:
                    seq = int(record["last_seq"])
                store.wait_for_events(execution_id, seq, 1.0)
                if progress is None:
                    # every commit of the execution wakes us: look at most every WAKE_GAP
                    # seconds (a busy execution commits hundreds of times a second, and this
                    # client shares the machine with it)
                    time.sleep(WAKE_GAP)
        finally:
            if progress is not None:
                progress.close()
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
    return report(result, program, args.json)
