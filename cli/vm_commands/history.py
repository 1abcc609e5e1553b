"""Shared by the commands that read an event store (status, events, replay, resume, cancel,
signal): the `--db` option (default `$NOETL_DB`, else the local SQLite file), opening a store
that must already exist, and finding an execution by its id or a unique prefix of it.

Problems are raised, not printed: `run_guarded` prints them and picks the exit code (a store
that cannot be used exits 5, an execution that cannot take the request exits 4).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from noetlc.cli.common import ExecutionStateError, UnavailableError

if TYPE_CHECKING:
    from noetlc.runtime.event_store import EventStore

DEFAULT_URL = "sqlite:///.noetl/noetl.db"  # = noetlc.runtime.event_store.DEFAULT_URL (tested)


def default_db() -> str:
    """`$NOETL_DB` when set, else the local SQLite file."""
    return os.environ.get("NOETL_DB") or DEFAULT_URL


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        default=default_db(),
        metavar="URL",
        help=f"event store: sqlite:///FILE, memory: or postgresql://... (default $NOETL_DB,"
        f" else {DEFAULT_URL})",
    )


def open_existing(url: str) -> EventStore:
    """Open a store to read it: a SQLite file that does not exist is an error (a mistyped
    path must not create an empty store and report nothing)."""
    from noetlc.runtime.store_url import open_store

    require_existing(url)
    return open_store(url)


def require_existing(url: str) -> None:
    """A SQLite store named to be read must exist (NOE803): reading never creates one."""
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///") :])
        if not path.is_file():
            raise UnavailableError(
                "NOE803",
                f"no event store at {path}",
                "check the --db path (or $NOETL_DB); `noetl-vm run` creates the store",
            )


def resolve_id(store: EventStore, execution_id: str, url: str) -> dict[str, Any]:
    """The record of `execution_id`, or of the one execution whose id starts with it."""
    record = store.execution(execution_id)
    if record is not None:
        return record
    matches = [r["execution_id"] for r in store.executions()]
    matches = [m for m in matches if m.startswith(execution_id)] if execution_id else []
    if len(matches) == 1:
        found = store.execution(matches[0])
        if found is not None:
            return found
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise ExecutionStateError(
            "NOE804",
            f"{execution_id!r} is the prefix of {len(matches)} executions in {url}: {shown}",
            "give more characters of the id",
        )
    raise ExecutionStateError(
        "NOE804",
        f"no execution {execution_id!r} in {url}",
        "`noetl-vm status` lists the executions of this store",
    )


def find_execution(
    store: EventStore,
    execution_id: str,
    url: str,
    *,
    running: bool = False,
    program: bool = False,
) -> dict[str, Any]:
    """The execution's record (by id or unique prefix). Raises when it cannot be used: it does
    not exist or the prefix is ambiguous (NOE804), it already ended when `running` is asked for
    (NOE856), or it was recorded without the program `program` asks for (NOE857)."""
    record = resolve_id(store, execution_id, url)
    full = record["execution_id"]
    if running and record["status"] != "running":
        raise ExecutionStateError(
            "NOE856",
            f"execution {full} already ended: {record['status']}",
            f"`noetl-vm status {full}` shows its summary",
        )
    if program and record.get("program") is None:
        raise ExecutionStateError(
            "NOE857", f"execution {full} was recorded without its program", None
        )
    return record
