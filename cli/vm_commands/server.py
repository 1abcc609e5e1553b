"""Run control VMs for distributed executions (any number of servers share one database).

    noetl-vm server --db postgresql://USER@HOST:PORT/DB [--ttl S] [--pool NAME]

Claims submitted executions and those of servers that died (after their ownership lease of
`--ttl` seconds expires), reaps expired job leases. SIGTERM or Ctrl-C: hand owned executions
back to the other servers and exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_db_required(p)
    p.add_argument("--ttl", type=float, default=15.0, help="ownership lease seconds (15)")
    p.add_argument("--poll", type=float, default=1.0, help="polling fallback seconds (1)")
    p.add_argument("--pool", default="default", help="worker pool for the jobs (default)")


def add_db_required(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        default=os.environ.get("NOETL_DB"),
        metavar="URL",
        help="postgresql://USER@HOST:PORT/DATABASE[?schema=NAME] (default $NOETL_DB)",
    )


def check_db(url: str | None) -> bool:
    if not url or not url.startswith(("postgresql://", "postgres://")):
        print(
            "error[NOE800]: distributed mode needs --db postgresql://... (or $NOETL_DB)",
            file=sys.stderr,
        )
        return False
    return True


async def serve(factory: object, url: str) -> int:
    from noetlc.runtime.postgres.database import Database

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    db = await Database.open(url)
    try:
        runner = factory(db)  # type: ignore[operator]
        print(f"{runner.owner} running on {db.url.display}", file=sys.stderr, flush=True)
        await runner.run(stop)
    finally:
        await db.close()
    return 0


def run(args: argparse.Namespace) -> int:
    from noetlc.runtime.server import Server

    if not check_db(args.db):
        return 2
    return asyncio.run(
        serve(lambda db: Server(db, ttl=args.ttl, poll=args.poll, pool=args.pool), args.db)
    )
