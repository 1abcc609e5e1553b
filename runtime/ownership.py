"""Who runs an embedded execution: an ownership lease in the SQLite event store.

The process that runs an execution (`noetl-vm run`, `noetl-vm resume`) holds a row of the
store's `owners` table: its pid, its host, and a heartbeat renewed every `ttl / 3` seconds by
a daemon thread on its own connection. Another process may take the execution over only when
the owner is gone: on the same host, when no process has its pid (an immediate answer after a
kill); on any host, when the heartbeat is older than `ttl` (a crashed machine, or a pid reused
by an unrelated process). A live owner is refused with its pid and host (NOE831, exit 4).

Every write of the owner is *fenced* by the lease (`SQLiteStore.fence`): an append, the
summary, a stored result commit only while the `owners` row still holds this process's token,
checked inside the write transaction. A process that was stopped (SIGSTOP, a frozen VM) past
the TTL and taken over by `resume` finds another token at its next commit: it writes nothing,
stops its actions and exits with NOE833 (exit 4), so the same iterations are never recorded
twice. `NOETL_LEASE_TTL` (seconds, default 15) sets the TTL.

The lease's SQL is runtime/sql/owners.sql. In-memory stores live in one process and need no
lease; distributed executions (PostgreSQL) are owned by servers through their own leases.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from noetlc.diagnostics.errors import ErrorKind, UserError
from noetlc.runtime.sql_files import q

DEFAULT_TTL = 15.0
TTL_VARIABLE = "NOETL_LEASE_TTL"


class OwnedError(UserError):
    """The execution is owned by a live process (NOE831): the command lines exit 4."""

    kind = ErrorKind.EXECUTION


class OwnershipLost(OwnedError):
    """This process's lease was taken over while it was stopped (NOE833, exit 4): its write
    was refused and it must stop."""

    def __init__(self, execution_id: str, owner: Owner | None) -> None:
        now_owner = (
            "no process owns it any more (it ended)"
            if owner is None
            else f"process {owner.pid} on {owner.host} owns it now"
        )
        super().__init__(
            "NOE833",
            f"execution {execution_id} was taken over while this process (pid {os.getpid()})"
            f" was not running: {now_owner}; this process wrote nothing more and stops",
            "nothing to do: the new owner finishes the execution (`noetl-vm status ID`)",
        )


def default_ttl() -> float:
    """The lease TTL: `NOETL_LEASE_TTL` seconds when set (a positive number), else 15."""
    text = os.environ.get(TTL_VARIABLE, "")
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_TTL
    return value if 0 < value < float("inf") else DEFAULT_TTL


@dataclass(frozen=True)
class Owner:
    """The process that owns an execution."""

    pid: int
    host: str
    renewed_at: float

    def alive(self, ttl: float, now: float) -> bool:
        if now - self.renewed_at > ttl:
            return False
        if self.host != hostname():
            return True
        return _pid_exists(self.pid)


def hostname() -> str:
    """This machine's name, as `socket.gethostname()` gives it: on POSIX both read uname's
    node name, and a cold `noetl-vm run` need not import `socket` (and `selectors`) for it."""
    uname = getattr(os, "uname", None)
    if uname is not None:
        return str(uname().nodename)
    import socket  # Windows

    return socket.gethostname()


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


class ExecutionLease:
    """This process's claim on one execution of a SQLite store."""

    def __init__(self, path: str, execution_id: str, ttl: float | None = None) -> None:
        self.path = path
        self.execution_id = execution_id
        self.ttl = default_ttl() if ttl is None else ttl
        self.token = f"{hostname()}:{os.getpid()}:{time.time_ns()}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_url(
        cls, url: str, execution_id: str, ttl: float | None = None
    ) -> ExecutionLease | None:
        """The lease for a store URL, or None when the store needs none (memory, PostgreSQL)."""
        if not url.startswith("sqlite:///"):
            return None
        path = url[len("sqlite:///") :]
        return cls(path, execution_id, ttl) if path and path != ":memory:" else None

    def _connect(self) -> sqlite3.Connection:
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None, timeout=5.0)
        db.execute("PRAGMA busy_timeout=5000")
        db.execute(q("owners_schema"))
        return db

    def owner(self) -> Owner | None:
        """The recorded owner of the execution (alive or not), if any."""
        db = self._connect()
        try:
            row = db.execute(q("owner_of"), {"execution_id": self.execution_id}).fetchone()
        finally:
            db.close()
        return None if row is None else Owner(int(row[0]), str(row[1]), float(row[2]))

    def claim(self) -> None:
        """Own the execution (taking it over from a dead owner) and start the heartbeat;
        raises `OwnedError` naming a live owner's pid and host."""
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute(q("owner_of"), {"execution_id": self.execution_id}).fetchone()
            now = time.time()
            if row is not None:
                current = Owner(int(row[0]), str(row[1]), float(row[2]))
                if current.alive(self.ttl, now):
                    db.execute("ROLLBACK")
                    raise OwnedError(
                        "NOE831",
                        f"execution {self.execution_id} is running in process {current.pid}"
                        f" on {current.host}",
                        "wait for it to end, or stop that process first (`noetl-vm cancel ID`"
                        " asks it to cancel)",
                    )
            db.execute(
                q("owner_claim"),
                {
                    "execution_id": self.execution_id,
                    "pid": os.getpid(),
                    "host": hostname(),
                    "token": self.token,
                    "renewed_at": now,
                },
            )
            db.execute("COMMIT")
        finally:
            db.close()
        self._thread = threading.Thread(target=self._heartbeat, name="noetl-lease", daemon=True)
        self._thread.start()

    def fence(self, store: object) -> None:
        """Make the store's writes conditional on this lease (a SQLite store; others need none)."""
        fence = getattr(store, "fence", None)
        if fence is not None:
            fence(self.execution_id, self.token)

    def _heartbeat(self) -> None:
        db = self._connect()
        try:
            while not self._stop.wait(self.ttl / 3):
                db.execute(
                    q("owner_renew"),
                    {
                        "renewed_at": time.time(),
                        "execution_id": self.execution_id,
                        "token": self.token,
                    },
                )
        except sqlite3.Error:
            pass  # the store went away: the lease lapses, which is what it is for
        finally:
            db.close()

    def release(self) -> None:
        """Stop the heartbeat and give the execution up (only if this process still owns it)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        try:
            db = self._connect()
        except (OSError, sqlite3.Error):
            return
        try:
            db.execute(q("owner_release"), {"execution_id": self.execution_id, "token": self.token})
        except sqlite3.Error:
            pass
        finally:
            db.close()
