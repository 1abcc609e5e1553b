"""Run tasks for distributed executions: lease jobs, run the pipeline VM, append events.

    noetl-vm worker --db postgresql://USER@HOST:PORT/DB [--concurrency N] [--pool NAME]

No inbound ports. Prints a line when it starts, one per execution each round finished jobs of
(`--log-level info`, the default), and one when it stops. SIGTERM or Ctrl-C: stop leasing, let
running jobs finish for `--grace` seconds, give the rest back (they are leased again at once,
no attempt spent), exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from noetlc.cli.common import UsageError
from noetlc.cli.vm_commands import isolate
from noetlc.cli.vm_commands.server import (
    MIN_POLL,
    add_db_required,
    add_log_level,
    check_db,
    grace_seconds,
    lease_seconds,
    poll_seconds,
    serve,
)
from noetlc.cli.vm_commands.status import positive


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_db_required(p)
    p.add_argument("--concurrency", type=positive, default=4, metavar="N", help="jobs at once (4)")
    p.add_argument(
        "--pool", default="default", metavar="NAME", help="the pool to lease from (default)"
    )
    p.add_argument(
        "--ttl", type=lease_seconds, default=15.0, metavar="S", help="job lease seconds (15)"
    )
    p.add_argument(
        "--poll",
        type=poll_seconds,
        default=1.0,
        metavar="S",
        help=f"polling fallback seconds, at least {MIN_POLL} (1)",
    )
    p.add_argument(
        "--grace", type=grace_seconds, default=10.0, metavar="S", help="shutdown grace seconds (10)"
    )
    p.add_argument("--keychain", metavar="FILE", help="a YAML/JSON file of keychain entries")
    add_log_level(p)
    isolate.add_arguments(p)


def run(args: argparse.Namespace) -> int:
    from noetlc.cli.vm_commands.run import check_keychain_file
    from noetlc.runtime.worker import Worker

    check_db(args.db)
    if args.concurrency < 1:
        raise UsageError("NOE800", "--concurrency must be at least 1")
    check_keychain_file(args.keychain)
    before = isolate.start(args, [])  # task code runs in child processes without our secrets

    def make(db: object) -> Worker:
        return Worker(
            db,  # type: ignore[arg-type]
            pool=args.pool,
            concurrency=args.concurrency,
            ttl=args.ttl,
            poll=args.poll,
            grace=args.grace,
            keychain_file=args.keychain,
        )

    try:
        status = asyncio.run(serve(make, args.db, args.log_level))
    finally:
        isolate.stop(before)
    _exit_past_stuck_threads(status)
    return status


def _exit_past_stuck_threads(status: int) -> None:
    """After the grace period the worker gave its unfinished jobs back; a tool still running
    in a thread (in-process python code that never returns) must not keep the process alive:
    Python would join that thread at exit, forever."""
    import os
    import threading

    if any(
        t.is_alive() and not t.daemon
        for t in threading.enumerate()
        if t is not threading.main_thread()
    ):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
