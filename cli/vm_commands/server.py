"""Run control VMs for distributed executions (any number of servers share one database).

    noetl-vm server --db postgresql://USER@HOST:PORT/DB [--ttl S] [--pool NAME]

Claims submitted executions and those of servers that died (after their ownership lease of
`--ttl` seconds expires), reaps expired job leases. Prints a line when it starts, one per
execution it takes and ends (`--log-level info`, the default; `warning` for fewer), and one
when it stops. SIGTERM or Ctrl-C: hand owned executions back to the other servers and exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import sys
import time

from noetlc.cli.common import UnavailableError, UsageError

LOG_LEVELS = ("debug", "info", "warning", "error")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_db_required(p)
    p.add_argument(
        "--ttl", type=lease_seconds, default=15.0, metavar="S", help="ownership lease seconds (15)"
    )
    p.add_argument(
        "--poll",
        type=poll_seconds,
        default=1.0,
        metavar="S",
        help=f"polling fallback seconds, at least {MIN_POLL} (1)",
    )
    p.add_argument(
        "--pool", default="default", metavar="NAME", help="worker pool for the jobs (default)"
    )
    p.add_argument(
        "--no-inline",
        action="store_true",
        help="enqueue noop-only steps for the workers instead of running them in the server",
    )
    p.add_argument(
        "--iterations-per-job",
        type=_per_job,
        default=None,
        metavar="N",
        help="loop iterations one job may run, 1 to 64 (16; 1: one job per iteration)",
    )
    add_log_level(p)


# A poll of 0 would query the database in a loop and hold a core; below 10 ms the fallback
# only adds load (notifications wake servers and workers at once).
MIN_POLL = 0.01


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number of seconds: {text!r}")
    return value


def lease_seconds(text: str) -> float:
    """`--ttl`: a lease of more than 0 seconds."""
    value = _seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a lease must be longer than 0 seconds, not {text}")
    return value


def poll_seconds(text: str) -> float:
    """`--poll`: at least `MIN_POLL` seconds."""
    value = _seconds(text)
    if value < MIN_POLL:
        raise argparse.ArgumentTypeError(
            f"must be at least {MIN_POLL} s, not {text} (0 would poll in a busy loop)"
        )
    return value


def grace_seconds(text: str) -> float:
    """`--grace`: 0 or more seconds."""
    value = _seconds(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, not {text}")
    return value


def _per_job(text: str) -> int:
    from noetlc.runtime.bundles import LIMIT

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 1 <= value <= LIMIT:
        raise argparse.ArgumentTypeError(f"must be from 1 to {LIMIT}")
    return value


def add_log_level(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="info",
        help="info: a line per execution (default); debug: more; warning: only problems",
    )


def setup_logging(level: str) -> None:
    import logging

    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )


def add_db_required(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        default=os.environ.get("NOETL_DB"),
        metavar="URL",
        help="postgresql://USER@HOST:PORT/DATABASE[?schema=NAME] (default $NOETL_DB)",
    )


def check_db(url: str | None) -> None:
    """Distributed mode needs a PostgreSQL URL (raises `UsageError`)."""
    if not url:
        raise UsageError(
            "NOE800",
            "distributed mode needs a database",
            "pass --db postgresql://... or set NOETL_DB",
        )
    if not url.startswith(("postgresql://", "postgres://")):
        scheme = url.split(":", 1)[0] if ":" in url else url
        raise UnavailableError(
            "NOE806",
            f"distributed mode needs a PostgreSQL URL, and {scheme!r} is not one",
            "use postgresql://USER@HOST:PORT/DATABASE[?schema=NAME]",
        )


async def serve(factory: object, url: str, log_level: str = "info") -> int:
    from noetlc.runtime.postgres.database import Database

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    setup_logging(log_level)
    db = await Database.open(url)
    started = time.monotonic()
    try:
        runner = factory(db)  # type: ignore[operator]
        print(f"{runner.owner} running on {db.url.display}", file=sys.stderr, flush=True)
        await runner.run(stop)
    finally:
        await db.close()
    done = getattr(runner, "finished", None)
    if done is None:
        done = getattr(runner, "completed", 0)
    what = "execution(s) ended" if hasattr(runner, "finished") else "job(s) done"
    print(
        f"{runner.owner} stopped after {time.monotonic() - started:.1f} s: {done} {what}",
        file=sys.stderr,
        flush=True,
    )
    return 0


def run(args: argparse.Namespace) -> int:
    from noetlc.runtime.bundles import PER_JOB
    from noetlc.runtime.server import Server

    check_db(args.db)
    return asyncio.run(
        serve(
            lambda db: Server(
                db,
                ttl=args.ttl,
                poll=args.poll,
                pool=args.pool,
                inline=not args.no_inline,
                per_job=args.iterations_per_job or PER_JOB,
            ),
            args.db,
            args.log_level,
        )
    )
