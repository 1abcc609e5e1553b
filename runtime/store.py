"""Event stores for the embedded runtime: one interface, in-memory and SQLite implementations.

An execution's events are appended in batches (one transaction per batch: group commit). The
store assigns `seq` (gap-free per execution) and skips an event whose `event_id` it already
holds, so re-appending a batch after a crash changes nothing. Besides the log a store keeps
the execution's record (the program it runs, its workload, its status and summary), requests
from other processes (`cancel`, `signal`) that the running process or `resume` picks up, and
the result store for reference-first payloads. `open_store(url)` takes `memory:`
or `sqlite:///path/to/file.db` (the default for `noetl-vm run` is `sqlite:///.noetl/noetl.db`).
"""

from __future__ import annotations

import contextlib
import json
import json.encoder
import os
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from noetlc.diagnostics.errors import UserError
from noetlc.vm.protocol import ENVELOPE, Event

# what `append` takes: the protocol's events (records, dicts with the envelope's fields, are
# accepted too and converted at this edge)
Appendable = Sequence[Event | Mapping[str, Any]]

DEFAULT_URL = "sqlite:///.noetl/noetl.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS executions (
    execution_id TEXT PRIMARY KEY,
    playbook TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    finished_at REAL,
    summary TEXT,
    program BLOB,
    workload TEXT,
    parent_id TEXT
);
CREATE TABLE IF NOT EXISTS events (
    execution_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event_id TEXT NOT NULL UNIQUE,
    ts REAL NOT NULL,
    name TEXT NOT NULL,
    source TEXT,
    step TEXT,
    step_run_id TEXT,
    task_run_id TEXT,
    iteration INTEGER,
    attempt INTEGER,
    parent_id TEXT,
    action_id TEXT,
    pc INTEGER,
    payload TEXT NOT NULL,
    PRIMARY KEY (execution_id, seq)
);
CREATE TABLE IF NOT EXISTS requests (
    request_id INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT,
    data TEXT,
    ts REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    data BLOB NOT NULL
);
"""
_SCHEMA_VERSION = 2


def _payload_encoder() -> Callable[[Any], str]:
    """Compact JSON, unknown types as `str`: what `json.dumps(value, default=str,
    separators=(",", ":"))` gives. `json.dumps` with options builds a new encoder per call and
    `JSONEncoder.encode` a new C encoder per call (half the cost of a small payload), so the C
    encoder is built once. It is built without a circular-reference memo (shared state between
    threads); a circular payload raises RecursionError instead of ValueError."""
    encode: Callable[[Any], str] = json.JSONEncoder(default=str, separators=(",", ":")).encode
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encode
    try:
        chunks = make(
            None, str, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
        )
        if "".join(chunks({"a": [1.5, None, "é"]}, 0)) != encode({"a": [1.5, None, "é"]}):
            return encode
    except TypeError:  # another signature in another Python version
        return encode
    return lambda value: "".join(chunks(value, 0))


encode_payload = _payload_encoder()


class StoreError(UserError):
    """A store cannot be opened or used; carries a stable code and a hint for the CLI."""


class EventStore(Protocol):
    def create_execution(
        self,
        execution_id: str,
        playbook: str,
        *,
        program: bytes | None = None,
        workload: dict[str, Any] | None = None,
        parent_id: str | None = None,
    ) -> None: ...
    def append(self, execution_id: str, events: Appendable) -> int: ...
    def finish_execution(self, execution_id: str, status: str, summary: dict[str, Any]) -> None: ...
    def read(self, execution_id: str, after_seq: int = 0) -> list[dict[str, Any]]: ...
    def executions(self) -> list[dict[str, Any]]: ...
    def execution(self, execution_id: str) -> dict[str, Any] | None: ...
    def request(
        self, execution_id: str, kind: str, name: str | None = None, data: Any = None
    ) -> int: ...
    def requests(self, execution_id: str, after_id: int = 0) -> list[dict[str, Any]]: ...
    def put_result(self, key: str, data: bytes) -> None: ...
    def get_result(self, key: str) -> bytes | None: ...
    def close(self) -> None: ...


def stored_record(execution_id: str, seq: int, event: Event, now: float) -> dict[str, Any]:
    """An event as a store gives it back: every envelope field, `seq`, the payload."""
    return {
        "execution_id": execution_id,
        "seq": seq,
        "event_id": event.event_id,
        "ts": event.ts or now,
        "name": event.name,
        "source": event.source,
        "step": event.step,
        "step_run_id": event.step_run_id,
        "task_run_id": event.task_run_id,
        "iteration": event.iteration,
        "attempt": event.attempt,
        "parent_id": event.parent_id,
        "action_id": event.action_id,
        "pc": event.pc,
        "payload": event.payload or {},
    }


class MemoryStore:
    """The in-memory double: the same interface and semantics, nothing survives the process."""

    def __init__(self) -> None:
        self._executions: dict[str, dict[str, Any]] = {}
        self._events: dict[str, list[tuple[float, Event]]] = {}  # (when appended, event)
        self._ids: set[str] = set()
        self._requests: list[dict[str, Any]] = []
        self._results: dict[str, bytes] = {}

    def create_execution(
        self,
        execution_id: str,
        playbook: str,
        *,
        program: bytes | None = None,
        workload: dict[str, Any] | None = None,
        parent_id: str | None = None,
    ) -> None:
        self._executions.setdefault(
            execution_id,
            {
                "execution_id": execution_id,
                "playbook": playbook,
                "status": "running",
                "created_at": time.time(),
                "finished_at": None,
                "summary": None,
                "program": program,
                "workload": workload,
                "parent_id": parent_id,
            },
        )
        self._events.setdefault(execution_id, [])

    def append(self, execution_id: str, events: Appendable) -> int:
        log = self._events.setdefault(execution_id, [])
        ids = self._ids
        added = 0
        now = time.time()
        for item in events:
            event = item if type(item) is Event else Event.from_record(item)
            event_id = event.event_id
            if event_id in ids:
                continue
            ids.add(str(event_id))
            log.append((now, event))  # the record is built when read
            added += 1
        return added

    def finish_execution(self, execution_id: str, status: str, summary: dict[str, Any]) -> None:
        record = self._executions[execution_id]
        record.update(status=status, finished_at=time.time(), summary=summary)

    def read(self, execution_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        log = self._events.get(execution_id, [])
        return [
            stored_record(execution_id, seq, event, now)
            for seq, (now, event) in enumerate(log[after_seq:], after_seq + 1)
        ]

    def executions(self) -> list[dict[str, Any]]:
        return sorted(self._executions.values(), key=lambda e: e["created_at"])

    def execution(self, execution_id: str) -> dict[str, Any] | None:
        return self._executions.get(execution_id)

    def request(
        self, execution_id: str, kind: str, name: str | None = None, data: Any = None
    ) -> int:
        request_id = len(self._requests) + 1
        self._requests.append(
            {
                "request_id": request_id,
                "execution_id": execution_id,
                "kind": kind,
                "name": name,
                "data": data,
                "ts": time.time(),
            }
        )
        return request_id

    def requests(self, execution_id: str, after_id: int = 0) -> list[dict[str, Any]]:
        return [
            r
            for r in self._requests
            if r["execution_id"] == execution_id and r["request_id"] > after_id
        ]

    def put_result(self, key: str, data: bytes) -> None:
        self._results[key] = data

    def get_result(self, key: str) -> bytes | None:
        return self._results.get(key)

    def close(self) -> None:
        pass


def private_file(path: str) -> None:
    """Create a store file readable by its owner only (0600) before SQLite opens it: it holds
    every execution's data, and the service's credentials (encrypted). SQLite gives its -wal
    and -shm files the database file's permissions. An existing file is left as it is."""
    if path == ":memory:" or path.startswith("file:"):
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


class SQLiteStore:
    def __init__(self, path: str) -> None:
        self.path = path
        self._last_seq: dict[str, int] = {}  # executions this store appended to last
        try:
            private_file(path)
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._upgrade()
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                "NOE803",
                f"cannot open the SQLite store {path}: {exc}",
                "check the path and its permissions",
            ) from None

    def _upgrade(self) -> None:
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        if version >= _SCHEMA_VERSION:
            return
        self._db.executescript(_SCHEMA)
        # a store written by an earlier noetlc: add the columns it lacks (nothing is lost)
        for table, columns in (
            ("executions", ("program BLOB", "workload TEXT", "parent_id TEXT")),
            ("events", tuple(f"{c} TEXT" for c in ENVELOPE[3:])),
        ):
            have = {r[1] for r in self._db.execute(f"PRAGMA table_info({table})")}
            for column in columns:
                if column.split()[0] not in have:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
        self._db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")

    def create_execution(
        self,
        execution_id: str,
        playbook: str,
        *,
        program: bytes | None = None,
        workload: dict[str, Any] | None = None,
        parent_id: str | None = None,
    ) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO executions (execution_id, playbook, status, created_at,"
            " program, workload, parent_id) VALUES (?, ?, 'running', ?, ?, ?, ?)",
            (
                execution_id,
                playbook,
                time.time(),
                program,
                None if workload is None else json.dumps(workload, default=str),
                parent_id,
            ),
        )

    def append(self, execution_id: str, events: Appendable) -> int:
        if not events:
            return 0
        batch = [Event.from_record(e) for e in events]
        db = self._db
        last = self._last_seq.get(execution_id)
        if last is None:
            # this store's first append to the execution: guess the last seq without the lock
            # (a writer appending in between makes (execution_id, seq) collide: careful path)
            (last,) = db.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE execution_id = ?", (execution_id,)
            ).fetchone()
        # fast path: these ids are new and nobody appended since `last`; the constraints check it
        rows = self._rows(execution_id, batch, last, set())
        try:
            self._insert(rows)
        except sqlite3.IntegrityError:
            pass  # a duplicate event_id or another writer: the careful path decides
        else:
            self._last_seq[execution_id] = last + len(rows)
            return len(rows)
        db.execute("BEGIN IMMEDIATE")  # the write lock: seq is assigned under it
        try:
            (last,) = db.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE execution_id = ?", (execution_id,)
            ).fetchone()
            ids = [str(e.event_id) for e in batch]
            known = {
                r[0]
                for chunk in range(0, len(ids), 500)
                for r in db.execute(
                    "SELECT event_id FROM events WHERE event_id IN"
                    f" ({','.join('?' * len(ids[chunk : chunk + 500]))})",
                    ids[chunk : chunk + 500],
                )
            }
            rows = self._rows(execution_id, batch, last, known)
            db.executemany(self._INSERT, rows)
            db.execute("COMMIT")
        except sqlite3.Error:
            db.execute("ROLLBACK")
            raise
        self._last_seq[execution_id] = last + len(rows)
        return len(rows)

    _INSERT = f"INSERT INTO events VALUES ({','.join('?' * (len(ENVELOPE) + 3))})"

    def _insert(self, rows: list[tuple[Any, ...]]) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(self._INSERT, rows)
            db.execute("COMMIT")
        except sqlite3.Error:
            db.execute("ROLLBACK")
            raise

    @staticmethod
    def _rows(
        execution_id: str, events: list[Event], last: int, known: set[str]
    ) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        add_row = rows.append
        seen = set(known)
        now = time.time()
        for event in events:
            (
                name,
                source,
                step,
                step_run_id,
                iteration,
                payload,
                event_id,
                _,
                _,
                ts,
                task_run_id,
                attempt,
                parent_id,
                action_id,
                pc,
            ) = event
            if event_id in seen:
                continue
            seen.add(event_id)  # type: ignore[arg-type]  # a missing id fails the insert
            last += 1
            add_row(
                (
                    execution_id,
                    last,
                    event_id,
                    ts or now,
                    name,
                    source,
                    step,
                    step_run_id,
                    task_run_id,
                    iteration,
                    attempt,
                    parent_id,
                    action_id,
                    pc,
                    encode_payload(payload) if payload else "{}",
                )
            )
        return rows

    def finish_execution(self, execution_id: str, status: str, summary: dict[str, Any]) -> None:
        self._db.execute(
            "UPDATE executions SET status = ?, finished_at = ?, summary = ? WHERE execution_id = ?",
            (status, time.time(), json.dumps(summary, default=str), execution_id),
        )

    def read(self, execution_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        cursor = self._db.execute(
            f"SELECT seq, {', '.join(ENVELOPE)}, payload FROM events"
            " WHERE execution_id = ? AND seq > ? ORDER BY seq",
            (execution_id, after_seq),
        )
        out = []
        for row in cursor:
            event: dict[str, Any] = {"execution_id": execution_id, "seq": row[0]}
            event.update(zip(ENVELOPE, row[1:-1], strict=True))
            for field in ("iteration", "attempt", "pc"):
                if event[field] is not None:
                    event[field] = int(event[field])
            event["payload"] = json.loads(row[-1])
            out.append(event)
        return out

    _EXECUTION_COLUMNS = (
        "execution_id, playbook, status, created_at, finished_at, summary, workload, parent_id"
    )

    def _execution_row(self, r: tuple[Any, ...]) -> dict[str, Any]:
        return {
            "execution_id": r[0],
            "playbook": r[1],
            "status": r[2],
            "created_at": r[3],
            "finished_at": r[4],
            "summary": json.loads(r[5]) if r[5] else None,
            "workload": json.loads(r[6]) if r[6] else None,
            "parent_id": r[7],
        }

    def executions(self) -> list[dict[str, Any]]:
        cursor = self._db.execute(
            f"SELECT {self._EXECUTION_COLUMNS} FROM executions ORDER BY created_at"
        )
        return [self._execution_row(r) for r in cursor]

    def execution(self, execution_id: str) -> dict[str, Any] | None:
        row = self._db.execute(
            f"SELECT {self._EXECUTION_COLUMNS}, program FROM executions WHERE execution_id = ?",
            (execution_id,),
        ).fetchone()
        if row is None:
            return None
        record = self._execution_row(row)
        record["program"] = row[8]
        return record

    def request(
        self, execution_id: str, kind: str, name: str | None = None, data: Any = None
    ) -> int:
        cursor = self._db.execute(
            "INSERT INTO requests (execution_id, kind, name, data, ts) VALUES (?, ?, ?, ?, ?)",
            (execution_id, kind, name, json.dumps(data, default=str), time.time()),
        )
        return int(cursor.lastrowid or 0)

    def requests(self, execution_id: str, after_id: int = 0) -> list[dict[str, Any]]:
        cursor = self._db.execute(
            "SELECT request_id, kind, name, data, ts FROM requests"
            " WHERE execution_id = ? AND request_id > ? ORDER BY request_id",
            (execution_id, after_id),
        )
        return [
            {
                "request_id": r[0],
                "execution_id": execution_id,
                "kind": r[1],
                "name": r[2],
                "data": json.loads(r[3]) if r[3] else None,
                "ts": r[4],
            }
            for r in cursor
        ]

    def put_result(self, key: str, data: bytes) -> None:
        self._db.execute("INSERT OR IGNORE INTO results (key, data) VALUES (?, ?)", (key, data))

    def get_result(self, key: str) -> bytes | None:
        row = self._db.execute("SELECT data FROM results WHERE key = ?", (key,)).fetchone()
        return None if row is None else bytes(row[0])

    def close(self) -> None:
        self._db.close()
