"""Shared by `status` and `events`: open the store named by --db, print errors cleanly."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from noetlc.runtime.store import DEFAULT_URL, EventStore, StoreError
from noetlc.runtime.stores import open_store


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db", default=DEFAULT_URL, metavar="URL", help=f"event store (default {DEFAULT_URL})"
    )


def open_or_report(url: str) -> EventStore | None:
    try:
        return open_store(url)
    except StoreError as exc:
        print(exc.render(), file=sys.stderr)  # exit 2 (usage), not run_guarded's 1
        return None


def find_execution(
    store: EventStore,
    execution_id: str,
    url: str,
    *,
    running: bool = False,
    program: bool = False,
) -> dict[str, Any] | None:
    """The execution's record, or None after printing why it cannot be used: it does not
    exist (NOE804), it already ended when `running` is asked for (NOE856), or it was recorded
    without the program `program` asks for (NOE857)."""
    record = store.execution(execution_id)
    if record is None:
        print(f"error[NOE804]: no execution {execution_id!r} in {url}", file=sys.stderr)
        return None
    if running and record["status"] != "running":
        print(
            f"error[NOE856]: execution {execution_id} already ended: {record['status']}",
            file=sys.stderr,
        )
        print("  hint: `noetl-vm status ID` shows its summary", file=sys.stderr)
        return None
    if program and record.get("program") is None:
        print(
            f"error[NOE857]: execution {execution_id} was recorded without its program",
            file=sys.stderr,
        )
        return None
    return record
