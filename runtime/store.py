"""Event stores for the embedded runtime: one interface, in-memory and SQLite implementations.

An execution's events are appended in batches (one transaction per batch: group commit) and
are idempotent on `(execution_id, event_id)`; `event_id` is derived from the execution and the
event's `seq`, so re-appending a batch after a crash changes nothing. `open_store(url)` takes
`memory:` or `sqlite:///path/to/file.db` (the default for `noetl-vm run` is
`sqlite:///.noetl/noetl.db`). The PostgreSQL store (issue 8) implements the same interface.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

DEFAULT_URL = "sqlite:///.noetl/noetl.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS executions (
    execution_id TEXT PRIMARY KEY,
    playbook TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    finished_at REAL,
    summary TEXT
);
CREATE TABLE IF NOT EXISTS events (
    execution_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_id TEXT NOT NULL UNIQUE,
    ts REAL NOT NULL,
    name TEXT NOT NULL,
    step TEXT,
    payload TEXT NOT NULL,
    PRIMARY KEY (execution_id, seq)
);
"""


class StoreError(Exception):
    """A store cannot be opened or used; carries a stable code and a hint for the CLI."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        self.code = code
        self.hint = hint
        super().__init__(message)


class EventStore(Protocol):
    def create_execution(self, execution_id: str, playbook: str) -> None: ...
    def append(self, execution_id: str, events: list[dict[str, Any]]) -> int: ...
    def finish_execution(self, execution_id: str, status: str, summary: dict[str, Any]) -> None: ...
    def read(self, execution_id: str, after_seq: int = 0) -> list[dict[str, Any]]: ...
    def executions(self) -> list[dict[str, Any]]: ...
    def close(self) -> None: ...


def event_id(execution_id: str, seq: int) -> str:
    """Stable per (execution, seq): the idempotency key of an append."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"noetl:{execution_id}:{seq}"))


def envelope(execution_id: str, event: dict[str, Any]) -> dict[str, Any]:
    return {
        "event_id": event_id(execution_id, event["seq"]),
        "execution_id": execution_id,
        "seq": event["seq"],
        "ts": event.get("ts", time.time()),
        "name": event["name"],
        "step": event.get("step"),
        "payload": event.get("payload", {}),
    }


class MemoryStore:
    def __init__(self) -> None:
        self._executions: dict[str, dict[str, Any]] = {}
        self._events: dict[str, dict[int, dict[str, Any]]] = {}

    def create_execution(self, execution_id: str, playbook: str) -> None:
        self._executions.setdefault(
            execution_id,
            {
                "execution_id": execution_id,
                "playbook": playbook,
                "status": "running",
                "created_at": time.time(),
                "finished_at": None,
                "summary": None,
            },
        )
        self._events.setdefault(execution_id, {})

    def append(self, execution_id: str, events: list[dict[str, Any]]) -> int:
        log = self._events.setdefault(execution_id, {})
        added = 0
        for event in events:
            if event["seq"] not in log:
                log[event["seq"]] = envelope(execution_id, event)
                added += 1
        return added

    def finish_execution(self, execution_id: str, status: str, summary: dict[str, Any]) -> None:
        record = self._executions[execution_id]
        record.update(status=status, finished_at=time.time(), summary=summary)

    def read(self, execution_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        log = self._events.get(execution_id, {})
        return [log[s] for s in sorted(log) if s > after_seq]

    def executions(self) -> list[dict[str, Any]]:
        return sorted(self._executions.values(), key=lambda e: e["created_at"])

    def close(self) -> None:
        pass


class SQLiteStore:
    def __init__(self, path: str) -> None:
        try:
            if path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                "NOE803",
                f"cannot open the SQLite store {path}: {exc}",
                "check the path and its permissions",
            ) from None

    def create_execution(self, execution_id: str, playbook: str) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO executions (execution_id, playbook, status, created_at) VALUES (?, ?, 'running', ?)",
            (execution_id, playbook, time.time()),
        )

    def append(self, execution_id: str, events: list[dict[str, Any]]) -> int:
        rows = [
            (
                e["execution_id"],
                e["seq"],
                e["event_id"],
                e["ts"],
                e["name"],
                e["step"],
                json.dumps(e["payload"], default=str),
            )
            for e in (envelope(execution_id, event) for event in events)
        ]
        before = self._db.total_changes
        self._db.execute("BEGIN")
        try:
            self._db.executemany("INSERT OR IGNORE INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            self._db.execute("COMMIT")
        except sqlite3.Error:
            self._db.execute("ROLLBACK")
            raise
        return self._db.total_changes - before

    def finish_execution(self, execution_id: str, status: str, summary: dict[str, Any]) -> None:
        self._db.execute(
            "UPDATE executions SET status = ?, finished_at = ?, summary = ? WHERE execution_id = ?",
            (status, time.time(), json.dumps(summary, default=str), execution_id),
        )

    def read(self, execution_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        cursor = self._db.execute(
            "SELECT event_id, execution_id, seq, ts, name, step, payload FROM events WHERE execution_id = ? AND seq > ? ORDER BY seq",
            (execution_id, after_seq),
        )
        return [
            {
                "event_id": r[0],
                "execution_id": r[1],
                "seq": r[2],
                "ts": r[3],
                "name": r[4],
                "step": r[5],
                "payload": json.loads(r[6]),
            }
            for r in cursor
        ]

    def executions(self) -> list[dict[str, Any]]:
        cursor = self._db.execute(
            "SELECT execution_id, playbook, status, created_at, finished_at, summary FROM executions ORDER BY created_at"
        )
        return [
            {
                "execution_id": r[0],
                "playbook": r[1],
                "status": r[2],
                "created_at": r[3],
                "finished_at": r[4],
                "summary": json.loads(r[5]) if r[5] else None,
            }
            for r in cursor
        ]

    def close(self) -> None:
        self._db.close()


def open_store(url: str) -> EventStore:
    """`memory:` or `sqlite:///relative/or//absolute/path.db`; anything else is NOE803."""
    if url in ("memory:", "memory://"):
        return MemoryStore()
    if url.startswith("sqlite:///"):
        return SQLiteStore(url[len("sqlite:///") :] or ":memory:")
    if url.startswith(("postgresql://", "postgres://")):
        raise StoreError(
            "NOE803",
            "the PostgreSQL store is not available yet in embedded mode",
            "use --db sqlite:///.noetl/noetl.db (the default) or --db memory:",
        )
    raise StoreError(
        "NOE803", f"unsupported store URL {url!r}", "use sqlite:///path/to/file.db or memory:"
    )
