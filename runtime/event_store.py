"""Event stores for the embedded runtime: one interface, in-memory and SQLite implementations.

An execution's events are appended in batches (one transaction per batch: group commit). The
store assigns `seq` (gap-free per execution) and skips an event whose `event_id` it already
holds, so re-appending a batch after a crash changes nothing. Besides the log a store keeps
the execution's record (the program it runs, its workload, its status and summary), requests
from other processes (`cancel`, `signal`) that the running process or `resume` picks up, and
the result store for reference-first payloads. `open_store(url)` takes `memory:`
or `sqlite:///path/to/file.db` (the default for `noetl-vm run` is `sqlite:///.noetl/noetl.db`).
The SQLite store's SQL is runtime/sql/store.sql; runtime/sql/schema.sql is its schema.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import orjson

from noetlc.diagnostics.errors import ErrorKind, UserError
from noetlc.runtime.ownership import Owner, OwnershipLost
from noetlc.runtime.sql_files import q
from noetlc.vm.protocol import ENVELOPE, Event

# what `append` takes: the protocol's events (records, dicts with the envelope's fields, are
# accepted too and converted at this edge)
Appendable = Sequence[Event | Mapping[str, Any]]

DEFAULT_URL = "sqlite:///.noetl/noetl.db"

# The SQL of the SQLite store: runtime/sql/store.sql and owners.sql (named statements,
# parameters by name but for the hot `event_insert`); runtime/sql/schema.sql is the schema.
SCHEMA_VERSION = 3
# the task-log columns after (seq, execution_id), as rows (runtime/logs.py) name them
LOG_COLUMNS = ("ts", "step", "iteration", "task", "attempt", "action_id", "stream", "text")


# orjson, not the standard library's json: 4-9x faster on the payloads the stores write
# (docs/performance.md, "Payload encoding"). Non-str keys and unknown types are written as
# json.dumps(default=str) writes them (datetimes and dataclasses as `str`, not orjson's own
# forms); NaN and infinities as null (PostgreSQL's json type refuses NaN).
_ORJSON_OPTIONS = (
    orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)
_orjson_dumps = orjson.dumps
# what orjson cannot write: integers past 64 bits, nesting past 254 levels, circular values
_fallback = json.JSONEncoder(default=str, separators=(",", ":"), ensure_ascii=False).encode


def encode_payload(value: Any) -> str:
    """Compact UTF-8 JSON of a payload, unknown types as `str`."""
    try:
        return _orjson_dumps(value, default=str, option=_ORJSON_OPTIONS).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return _fallback(value)


class StoreError(UserError):
    """A store cannot be opened or used; carries a stable code and a hint for the CLI."""

    kind = ErrorKind.UNAVAILABLE


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
    def append_logs(self, execution_id: str, rows: list[dict[str, Any]]) -> None: ...
    def read_logs(
        self,
        execution_id: str,
        after: int = 0,
        step: str | None = None,
        iteration: int | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]: ...
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
        self._logs: list[dict[str, Any]] = []

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

    def append_logs(self, execution_id: str, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            seq = len(self._logs) + 1
            record = {c: row.get(c) for c in LOG_COLUMNS}
            self._logs.append({**record, "seq": seq, "execution_id": execution_id})

    def read_logs(
        self,
        execution_id: str,
        after: int = 0,
        step: str | None = None,
        iteration: int | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        return [
            r
            for r in self._logs[after:]
            if r["execution_id"] == execution_id
            and (step is None or r["step"] == step)
            and (iteration is None or r["iteration"] == iteration)
        ][:limit]

    def close(self) -> None:
        pass


def ensure_sqlite_folder(path: str) -> None:
    """The folder of a SQLite file must exist: a mistyped `--db` path must not create folders
    silently (anywhere, as whoever runs it). The one folder created is the default store's
    `.noetl/`, the last level only, like a tool's own state folder (docs/runtime.md)."""
    if path == ":memory:":
        return
    folder = Path(path).parent
    if folder.is_dir():
        return
    if folder.name == ".noetl" and folder.parent.is_dir():
        try:
            folder.mkdir(exist_ok=True)
            return
        except OSError as exc:
            raise StoreError(
                "NOE803",
                f"cannot create {folder}: {exc}",
                "check the permissions of the current folder, or pass --db",
            ) from None
    raise StoreError(
        "NOE803",
        f"cannot open the SQLite store {path}: the folder {folder} does not exist",
        f"create it first (mkdir -p {folder}) or pick another --db path; the file is created"
        " when missing, its folder is not",
    )


# One write lock per SQLite file and process: the runtimes of an embedded fan-out (a child
# execution per pool thread, each on its own connection) queue here for the file's write
# lock instead of racing for it, where SQLite gives up after its busy timeout ("database is
# locked") and would leave the losing child `running`. Other processes still meet SQLite's
# own lock and its busy timeout.
_WRITE_LOCKS: dict[str, threading.RLock] = {}
_WRITE_LOCKS_GUARD = threading.Lock()


def _write_lock(path: str) -> threading.RLock:
    key = path if path == ":memory:" else str(Path(path).resolve())
    with _WRITE_LOCKS_GUARD:
        lock = _WRITE_LOCKS.get(key)
        if lock is None:
            lock = _WRITE_LOCKS[key] = threading.RLock()
        return lock


# the sqlite3 errors a user can fix (a lock held too long, a full disk, a read-only file):
# NOE814 at the command line and the API instead of an internal error
_UNWRITABLE = ("locked", "busy", "disk is full", "readonly", "disk i/o error")


def store_error_of(exc: BaseException) -> StoreError | None:
    """NOE814 for a SQLite failure the user can fix (see `_UNWRITABLE`), else None."""
    if not isinstance(exc, sqlite3.OperationalError):
        return None
    text = str(exc)
    if not any(part in text.lower() for part in _UNWRITABLE):
        return None
    return StoreError(
        "NOE814",
        f"the SQLite store cannot be written: {text}",
        "another process may hold its write lock (`fuser FILE`: a stopped noetl-vm?), or the "
        "disk is full or read-only; nothing committed is lost, run the command again",
    )


# CPython 3.11's sqlite3 binds an int, float, str or bytearray parameter as it is, but passes
# anything else through its adaptation protocol first — None included: a look-up of
# `__adapt__` on its protocol type that fails by raising and clearing an AttributeError
# (~2,000 instructions, ~0.2 µs) for every None bound. An event row binds 5–7 None columns:
# under callgrind, a run of the SQLite-logged control VM benchmark (bench/test_bench_vm_core.py)
# went from 444 M to 374 M instructions with this. An adapter registered for None is found
# first (a dict look-up) and an empty dict's `get` returns None for it without a Python
# frame: the value bound is still NULL. Process-wide (the sqlite3 module's adapter table),
# like the behaviour it replaces.
_NONE_TO_NULL: dict[Any, None] = {}
sqlite3.register_adapter(type(None), _NONE_TO_NULL.get)


def connect_wal(path: str) -> sqlite3.Connection:
    """A connection as every store on a SQLite file opens it: shared by threads (each store
    serialises its own use), waiting for a busy writer, WAL with synchronous=NORMAL (a commit
    is durable at the next checkpoint, not fsynced one by one)."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA busy_timeout=5000")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def private_file(path: str) -> None:
    """Create a store file readable by its owner only (0600) before SQLite opens it: it holds
    every execution's data, and the service's credentials (encrypted). SQLite gives its -wal
    and -shm files the database file's permissions. An existing file is left as it is."""
    if path == ":memory:" or path.startswith("file:"):
        return
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


_LAST_SEQ = q("event_last_seq")
_EVENT_READ = q("event_read")
_OWNER_LEASE = q("owner_lease")


class SQLiteStore:
    def __init__(self, path: str) -> None:
        self.path = path
        self._last_seq: dict[str, int] = {}  # executions this store appended to last
        self._fence: tuple[str, str] | None = None  # (owned execution, lease token)
        ensure_sqlite_folder(path)
        try:
            self._lock = threading.RLock() if path == ":memory:" else _write_lock(path)
            private_file(path)
            self._db = connect_wal(path)
            self._upgrade()
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                "NOE803",
                f"cannot open the SQLite store {path}: {exc}",
                "check the path and its permissions",
            ) from None

    def _upgrade(self) -> None:
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        if version >= SCHEMA_VERSION:
            return
        self._db.executescript(q("store_schema"))
        # a store written by an earlier noetlc: add the columns it lacks (nothing is lost)
        for table, columns in (
            ("executions", ("program BLOB", "workload TEXT", "parent_id TEXT")),
            ("events", tuple(f"{c} TEXT" for c in ENVELOPE[3:])),
        ):
            have = {r[1] for r in self._db.execute(f"PRAGMA table_info({table})")}
            for column in columns:
                if column.split()[0] not in have:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
        self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def fence(self, owned: str, token: str) -> None:
        """Make every later write of this connection conditional on the lease of `owned`
        (runtime/ownership.py) still holding `token`: checked inside the write transaction, so
        a process that lost its execution to `resume` commits nothing more (OwnershipLost).
        A child execution's store is fenced by its root's lease (`sibling`)."""
        self._db.execute(q("owners_schema"))
        self._fence = (owned, token)

    def sibling(self) -> SQLiteStore:
        """Another connection to the same file (for another thread) under the same fence."""
        other = SQLiteStore(self.path)
        other._fence = self._fence
        return other

    def _check_fence(self) -> None:
        """Inside a write transaction: raise OwnershipLost unless the lease still holds."""
        if self._fence is None:
            return
        owned, token = self._fence
        row = self._db.execute(_OWNER_LEASE, {"execution_id": owned}).fetchone()
        if row is None or row[0] != token:
            owner = None if row is None else Owner(int(row[1]), str(row[2]), float(row[3]))
            raise OwnershipLost(owned, owner)

    def _write(self, sql: str, params: Mapping[str, Any]) -> sqlite3.Cursor:
        """One statement in its own transaction, under the fence."""
        db = self._db
        with self._lock:
            if self._fence is None:
                return db.execute(sql, params)
            db.execute("BEGIN IMMEDIATE")
            try:
                self._check_fence()
                cursor = db.execute(sql, params)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return cursor

    def create_execution(
        self,
        execution_id: str,
        playbook: str,
        *,
        program: bytes | None = None,
        workload: dict[str, Any] | None = None,
        parent_id: str | None = None,
    ) -> None:
        self._write(
            q("execution_create"),
            {
                "execution_id": execution_id,
                "playbook": playbook,
                "created_at": time.time(),
                "program": program,
                "workload": None if workload is None else json.dumps(workload, default=str),
                "parent_id": parent_id,
            },
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
            (last,) = db.execute(_LAST_SEQ, {"execution_id": execution_id}).fetchone()
        # fast path: these ids are new and nobody appended since `last`; the constraints check it
        rows = self._rows(execution_id, batch, last, set())
        try:
            self._insert(rows)
        except sqlite3.IntegrityError:
            pass  # a duplicate event_id or another writer: the careful path decides
        else:
            self._last_seq[execution_id] = last + len(rows)
            return len(rows)
        self._lock.acquire()
        db.execute("BEGIN IMMEDIATE")  # the write lock: seq is assigned under it
        try:
            self._check_fence()
            (last,) = db.execute(_LAST_SEQ, {"execution_id": execution_id}).fetchone()
            ids = json.dumps([str(e.event_id) for e in batch])
            known = {r[0] for r in db.execute(q("event_ids_known"), {"event_ids": ids})}
            rows = self._rows(execution_id, batch, last, known)
            db.executemany(self._INSERT, rows)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        finally:
            self._lock.release()
        self._last_seq[execution_id] = last + len(rows)
        return len(rows)

    _INSERT = q("event_insert")  # by position: the hot path (runtime/sql/store.sql)

    def _insert(self, rows: list[tuple[Any, ...]]) -> None:
        db = self._db
        with self._lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                self._check_fence()
                db.executemany(self._INSERT, rows)
                db.execute("COMMIT")
            except BaseException:
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
        self._write(
            q("execution_finish"),
            {
                "status": status,
                "finished_at": time.time(),
                "summary": json.dumps(summary, default=str),
                "execution_id": execution_id,
            },
        )

    def read(self, execution_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        cursor = self._db.execute(
            _EVENT_READ, {"execution_id": execution_id, "after_seq": after_seq}
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
        cursor = self._db.execute(q("execution_list"))
        return [self._execution_row(r) for r in cursor]

    def execution(self, execution_id: str) -> dict[str, Any] | None:
        row = self._db.execute(q("execution_one"), {"execution_id": execution_id}).fetchone()
        if row is None:
            return None
        record = self._execution_row(row)
        record["program"] = row[8]
        return record

    def request(
        self, execution_id: str, kind: str, name: str | None = None, data: Any = None
    ) -> int:
        with self._lock:
            cursor = self._db.execute(
                q("request_add"),
                {
                    "execution_id": execution_id,
                    "kind": kind,
                    "name": name,
                    "data": json.dumps(data, default=str),
                    "ts": time.time(),
                },
            )
        return int(cursor.lastrowid or 0)

    def requests(self, execution_id: str, after_id: int = 0) -> list[dict[str, Any]]:
        cursor = self._db.execute(
            q("request_list"), {"execution_id": execution_id, "after_id": after_id}
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
        self._write(q("result_put"), {"key": key, "data": data})

    def get_result(self, key: str) -> bytes | None:
        row = self._db.execute(q("result_get"), {"key": key}).fetchone()
        return None if row is None else bytes(row[0])

    def append_logs(self, execution_id: str, rows: list[dict[str, Any]]) -> None:
        self._db.executemany(
            q("log_append"),
            [{"execution_id": execution_id, **{c: r.get(c) for c in LOG_COLUMNS}} for r in rows],
        )

    def read_logs(
        self,
        execution_id: str,
        after: int = 0,
        step: str | None = None,
        iteration: int | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        cursor = self._db.execute(
            q("log_read"),
            {
                "execution_id": execution_id,
                "after": after,
                "step": step,
                "iteration": iteration,
                "limit": limit,
            },
        )
        return [dict(zip(("seq", *LOG_COLUMNS), r, strict=True)) for r in cursor]

    def forget(self, execution_id: str) -> None:
        """Drop what this connection keeps for an execution it appends to (its last seq): a
        connection reused for execution after execution (the service's worker threads)."""
        self._last_seq.pop(execution_id, None)

    @property
    def fenced(self) -> bool:
        """Whether writes are conditional on a lease (`fence`)."""
        return self._fence is not None

    def close(self) -> None:
        self._db.close()
