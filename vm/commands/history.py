"""Shared by `status` and `events`: open the store named by --db, print errors cleanly."""

from __future__ import annotations

import argparse
import sys

from noetlc.runtime.store import DEFAULT_URL, EventStore, StoreError, open_store


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db", default=DEFAULT_URL, metavar="URL", help=f"event store (default {DEFAULT_URL})"
    )


def open_or_report(url: str) -> EventStore | None:
    try:
        return open_store(url)
    except StoreError as exc:
        print(f"error[{exc.code}]: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"  hint: {exc.hint}", file=sys.stderr)
        return None
