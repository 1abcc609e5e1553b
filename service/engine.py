"""Where the service's executions run.

Embedded (`sqlite:///FILE` or `memory:`): each execution runs in this process, on a thread
of its own while it runs (a worker thread, kept with its store connection for the next
execution once idle) with the embedded runtime, writing to the same store the API reads.
Distributed (`postgresql://...`): the execution is created and offered to the database's servers exactly
as `noetl-vm submit` does; any number of `noetl-vm server|worker` processes (and API
processes) share the database.

Execution ids are 64-bit snowflake integers in decimal, the ids NoETL clients expect.
Cancel and signal requests go through the store, where the process running the execution
reads them (the embedded thread's cancel flag is also set, so it stops at once).
"""

from __future__ import annotations

import hashlib
import queue
import threading
from typing import Any

from noetlc.runtime.credentials import StoreCredentials
from noetlc.runtime.driver import failed_summary
from noetlc.runtime.event_store import EventStore
from noetlc.runtime.ids import snowflake
from noetlc.vm.protocol import TERMINAL_NAMES, EventName, Source, envelope

# a worker thread with no execution to run for this long leaves (its store connection closed)
IDLE_SECONDS = 30.0


class Run:
    """One embedded execution on a worker thread: its cancel flag, and `join` (as a thread's)
    to wait for its end."""

    __slots__ = ("done", "stop")

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.done = threading.Event()

    def join(self, timeout: float | None = None) -> None:
        self.done.wait(timeout)

    def is_alive(self) -> bool:
        return not self.done.is_set()


class Engine:
    def __init__(self, url: str, keychain_file: str | None = None) -> None:
        from noetlc.runtime.store_url import open_store

        self.url = url
        self.distributed = url.startswith(("postgresql://", "postgres://"))
        self.keychain_file = keychain_file
        self.store: EventStore = open_store(url)
        self._lock = threading.Lock()  # one API connection, used from the worker threads
        # execution id -> (its run: `join` waits for its end, its cancel flag)
        self._running: dict[str, tuple[Run, threading.Event]] = {}
        # the worker threads that run embedded executions (`_thread`)
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pool = threading.Lock()
        self._workers = 0  # worker threads alive
        self._idle = 0  # of them, waiting for a job nobody counts on them for
        self._programs: dict[bytes, tuple[Any, dict[str, Any]]] = {}
        # keychain entries from the credential store (set by the app when it has a key)
        self.credentials: StoreCredentials | None = None

    # ------------------------------------------------------------------ reads

    def execution(self, execution_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self.store.execution(execution_id)

    def executions(self) -> list[dict[str, Any]]:
        with self._lock:
            return self.store.executions()

    def events(self, execution_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        with self._lock:
            return self.store.read(execution_id, after_seq)

    def logs(
        self,
        execution_id: str,
        after: int = 0,
        step: str | None = None,
        iteration: int | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        with self._lock:
            return self.store.read_logs(execution_id, after, step, iteration, limit)

    # ------------------------------------------------------------------ writes

    def start(
        self,
        program: bytes,
        name: str,
        workload: dict[str, Any],
        parent_id: str | None = None,
    ) -> str:
        """Start an execution of `program` (stored container bytes) with `workload` merged
        over the playbook's own; returns its id once the execution exists in the store."""
        image, defaults = self._decoded(program)
        merged = {**defaults, **workload}
        execution_id = snowflake()
        if self.distributed:
            with self._lock:  # created and offered in one transaction
                self.store.submit(  # type: ignore[attr-defined]
                    execution_id, name, program=program, workload=merged, parent_id=parent_id
                )
            return execution_id
        with self._lock:
            # created here, before the thread starts: a status read right after this call
            # finds the execution (the runtime's own create is then a no-op)
            self.store.create_execution(
                execution_id, name, program=program, workload=merged, parent_id=parent_id
            )
        self._thread(image, workload, execution_id, parent_id)
        return execution_id

    def _thread(
        self, image: Any, workload: dict[str, Any], execution_id: str, parent_id: str | None
    ) -> None:
        """Run the execution on a worker thread: an idle one when there is one, else a new
        one. Every execution still has a thread of its own while it runs (a long one never
        holds up another); what is kept between executions is the thread and its store
        connection: starting a thread (the starter waits until it runs) and opening a SQLite
        connection (connect, pragmas, schema check) were a quarter of the CPU time of a
        one-step execution started through the API (docs/performance.md, "The service")."""
        run = Run(threading.Event())
        self._running[execution_id] = (run, run.stop)
        with self._pool:
            self._jobs.put((image, workload, execution_id, parent_id, run))
            if self._idle > 0:
                self._idle -= 1  # an idle worker takes it
                return
            self._workers += 1
        threading.Thread(target=self._worker, name="execution-worker", daemon=True).start()

    def _worker(self) -> None:
        """Take executions from `_jobs` until idle for `IDLE_SECONDS` (or the engine closes).
        `_idle` counts the workers waiting for a job that no `_thread` call has counted on:
        `_thread` takes one of them, or starts a worker, for every job it queues."""
        store: EventStore | None = None
        counted = True  # in `_workers`
        try:
            while True:
                try:
                    job = self._jobs.get(timeout=IDLE_SECONDS)
                except queue.Empty:
                    with self._pool:
                        if self._idle > 0:  # nobody counts on this worker: it leaves
                            self._idle -= 1
                            self._workers -= 1
                            counted = False
                            return
                    continue  # a job was queued for it meanwhile
                if job is None:  # the engine closed
                    return
                image, workload, execution_id, parent_id, run = job
                store = self._execute(image, workload, execution_id, parent_id, run, store)
                with self._pool:
                    self._idle += 1
        finally:
            if counted:
                with self._pool:
                    self._workers -= 1
            if store is not None and store is not self.store:
                store.close()

    def _execute(
        self,
        image: Any,
        workload: dict[str, Any],
        execution_id: str,
        parent_id: str | None,
        run: Run,
        store: EventStore | None,
    ) -> EventStore | None:
        """Run one execution on this worker's store connection (opened at its first); returns
        the connection to keep for the next one (None: open another)."""
        from noetlc.runtime.event_store import SQLiteStore

        try:
            if store is None:
                store = self.store
                if isinstance(store, SQLiteStore):
                    store = SQLiteStore(store.path)  # the worker's own connection
            self._run(image, workload, execution_id, parent_id, run.stop, store)
        finally:
            self._running.pop(execution_id, None)
            run.done.set()
        if isinstance(store, SQLiteStore):
            store.forget(execution_id)
            if store.fenced:  # (nothing the service runs fences it; if it did: not reused)
                store.close()
                return None
        return store

    def resume_orphans(self, started_here: set[str]) -> list[str]:
        """Embedded: finish the executions this service started (`started_here`: the API's
        execution ids) that are still `running` in the store while no process runs them —
        the service stopped before they ended. Each is rebuilt from its log, and tasks that
        had finished are not called again. Returns their ids."""
        if self.distributed:
            return []
        orphans = [
            str(r["execution_id"])
            for r in self.executions()
            if r["status"] == "running"
            and str(r["execution_id"]) in started_here
            and str(r["execution_id"]) not in self._running
        ]
        for execution_id in orphans:
            self._thread(None, {}, execution_id, None)
        return orphans

    def _decoded(self, program: bytes) -> tuple[Any, dict[str, Any]]:
        """The verified program and its workload; the last few are kept (a catalog version
        is started again and again, and verifying a stored program is the costly part)."""
        from noetlc.runtime.stored_program import decode_program

        key = hashlib.sha256(program).digest()
        found = self._programs.get(key)
        if found is None:
            image = decode_program(program)
            found = (image, dict(image.workload))
            if len(self._programs) >= 64:
                self._programs.pop(next(iter(self._programs)))
            self._programs[key] = found
        return found

    def _run(
        self,
        image: Any,
        workload: dict[str, Any],
        execution_id: str,
        parent_id: str | None,
        stop: threading.Event,
        store: EventStore,
    ) -> None:
        from noetlc.runtime.embedded import run_embedded

        try:
            if image is None:  # an execution the service left running: finish it
                from noetlc.runtime.embedded import resume_embedded

                resume_embedded(
                    store,
                    execution_id,
                    keychain_file=self.keychain_file,
                    stop=stop,
                    provider=self.provider(execution_id),
                )
            else:
                run_embedded(
                    image,
                    workload,
                    store,
                    execution_id=execution_id,
                    parent_id=parent_id,
                    keychain_file=self.keychain_file,
                    stop=stop,
                    provider=self.provider(execution_id),
                )
        except Exception as exc:  # a run that could not start (e.g. a keychain file error)
            error = {"code": getattr(exc, "code", "NOE850"), "message": str(exc)}
            events = _end_log_failed(store, execution_id, error)
            store.finish_execution(
                execution_id, "failed", failed_summary(execution_id, error, events)
            )

    def provider(self, execution_id: str) -> Any:
        """The keychain provider of one execution: credential-store reads are recorded with
        the execution's id."""
        if self.credentials is None:
            return None
        return self.credentials.provider("keychain:embedded", execution_id)

    def cancel(self, execution_id: str, reason: str) -> None:
        with self._lock:
            self.store.request(execution_id, "cancel", None, {"reason": reason})
        running = self._running.get(execution_id)
        if running is not None:
            running[1].set()

    def signal(self, execution_id: str, name: str, data: Any) -> int:
        with self._lock:
            return self.store.request(execution_id, "signal", name, data)

    def running_here(self, execution_id: str) -> bool:
        return execution_id in self._running

    def close(self) -> None:
        """Close the API's connection. Executions still running here are not cancelled: they
        stop with the process and stay `running` in the store, where the next `noetl-vm
        serve` on the same store (or `noetl-vm resume ID`) finishes them: nothing that was
        committed is lost or repeated. Idle workers leave and close their connections."""
        with self._pool:
            for _ in range(self._workers):
                self._jobs.put(None)  # a busy worker leaves after its execution
        self.store.close()


def _end_log_failed(store: EventStore, execution_id: str, error: dict[str, Any]) -> int:
    """End the log of an execution whose run stopped before its VM could (a keychain file
    that does not load, a crash): `execution.failed` with the error, unless the log already
    ended (one terminal event per log). Returns the log's event count."""
    log = store.read(execution_id)
    if log and log[-1]["name"] in TERMINAL_NAMES:
        return len(log)
    failed = envelope(
        EventName.EXECUTION_FAILED,
        Source.SERVER,
        event_id=f"{execution_id}:not-started" if not log else f"{execution_id}:stopped",
        payload={"error": error},
    )
    store.append(execution_id, [failed])
    return len(log) + 1
