"""Manage the PostgreSQL database of distributed mode.

  noetl-vm db upgrade --db URL   apply the pending schema migrations (idempotent; safe to run
                                 while other upgrades, servers or workers are running)
  noetl-vm db status  --db URL   list applied and pending migrations (exit 1 unless current)

URL: postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?schema=NAME]; default $NOETL_DB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import TYPE_CHECKING

from noetlc.cli.common import EXIT_ERRORS as EXIT_FAILED
from noetlc.cli.common import EXIT_OK

if TYPE_CHECKING:
    from noetlc.runtime.postgres.migrate import SchemaStatus


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    for name, help_text in (
        ("upgrade", "apply pending migrations"),
        ("status", "show applied and pending migrations"),
    ):
        action = sub.add_parser(name, help=help_text, description=help_text)
        action.add_argument(
            "--db",
            default=os.environ.get("NOETL_DB"),
            metavar="URL",
            help="postgresql://USER@HOST:PORT/DATABASE[?schema=NAME] (default $NOETL_DB)",
        )
        action.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from noetlc.cli.vm_commands.server import check_db

    check_db(args.db)
    if args.db_command == "upgrade":
        return _upgrade(args.db, args.json)
    return _status(args.db, args.json)


def _upgrade(url: str, as_json: bool) -> int:
    from noetlc.runtime.postgres.migrate import schema_status, upgrade

    applied = asyncio.run(upgrade(url))
    status = asyncio.run(schema_status(url))
    if as_json:
        print(
            json.dumps(
                {
                    "schema": status.schema,
                    "applied_now": [f"{m.version:04d}_{m.name}" for m in applied],
                    "version": max((a.version for a in status.applied), default=0),
                }
            )
        )
    elif applied:
        for m in applied:
            print(f"applied {m.version:04d}_{m.name}")
        print(f"schema {status.schema!r} is current")
    else:
        print(f"schema {status.schema!r} is current; nothing to apply")
    return EXIT_OK


def _status(url: str, as_json: bool) -> int:
    from noetlc.runtime.postgres.migrate import schema_status

    status: SchemaStatus = asyncio.run(schema_status(url))
    if as_json:
        print(
            json.dumps(
                {
                    "schema": status.schema,
                    "current": status.current,
                    "applied": [
                        {"version": a.version, "name": a.name, "applied_at": a.applied_at}
                        for a in status.applied
                    ],
                    "pending": [f"{m.version:04d}_{m.name}" for m in status.pending],
                    "unknown": [f"{a.version:04d}_{a.name}" for a in status.unknown],
                    "modified": [f"{a.version:04d}_{a.name}" for a in status.modified],
                }
            )
        )
    else:
        for a in status.applied:
            mark = " (modified: NOE811)" if a in status.modified else ""
            mark = " (unknown to this release: NOE809)" if a in status.unknown else mark
            print(f"applied  {a.version:04d}_{a.name}  {a.applied_at}{mark}")
        for m in status.pending:
            print(f"pending  {m.version:04d}_{m.name}")
        verdict = "current" if status.current else "NOT current (noetl-vm db upgrade --db URL)"
        print(f"schema {status.schema!r}: {verdict}")
    return EXIT_OK if status.current else EXIT_FAILED
