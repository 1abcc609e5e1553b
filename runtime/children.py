"""`kind: playbook`: a child execution — in distributed workers on the same cluster
(`ChildRunner`), in the embedded runtime in the same process and store (`EmbeddedChildren`).

Distributed: the tool thread compiles the child playbook, creates its execution with the parent's id and
the same first event `noetl-vm submit` writes (program and workload travel in it), offers it
to the servers, and waits for its summary through the database (woken by the child's event
NOTIFYs, polling as the fallback). The tool's outcome is the child's summary, as in embedded
mode; a child not waited for (`wait=False`) is only started. The child's id is a function of the parent's call (runtime/execute.py
`child_execution_id`) and every step of starting it is idempotent, so a parent job re-leased
after its worker died waits for the child the first lease started. When the waiting job is
cancelled (its parent was cancelled or ended, or the iteration was cancelled), the child is
cancelled too. While it waits the job lends its worker slot (`on_wait`): the child's own
jobs can run on the same worker, even with `--concurrency 1`.

Embedded: the child runs in the calling action's pool thread with its own runtime (its own
SQLite connection, fenced by the root's lease), or, not waited for, in a thread of its own
that the parent's run joins before it returns; its id is the same function of the call, so
a resumed parent finds the child its first run started (finished: its summary; left running:
resumed).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from noetlc.ir.events import EventName
from noetlc.runtime.backend import Backend
from noetlc.runtime.catalog import CatalogStore
from noetlc.runtime.driver import program_from_requested
from noetlc.runtime.event_store import EventStore
from noetlc.runtime.family import Family
from noetlc.runtime.ownership import OwnershipLost
from noetlc.runtime.stored_program import requested_event
from noetlc.vm.budgets import budgets_for, over_budget_error
from noetlc.vm.pipeline import ToolCall
from noetlc.vm.protocol import Source, envelope

if TYPE_CHECKING:
    from noetlc.compiler.unit import CompilationUnit
    from noetlc.ir.program import Program

_CATALOGS: dict[str, CatalogStore] = {}  # a distributed worker's catalogs, by database
_CATALOGS_LOCK = threading.Lock()

# root execution id -> its budgets (a tree's children are counted with its root's values)
_ROOT_BUDGETS: dict[str, dict[str, int]] = {}

# action_id -> (job_id, cancel flag) of the job the worker runs for it, or None
RunningJob = Callable[[str], tuple[str, threading.Event] | None]


def catalog_reference(path: str) -> tuple[str, int | None]:
    """`catalog://PATH@VERSION`, `PATH@VERSION` or `PATH` -> (PATH, VERSION or None: latest)."""
    text = path[len("catalog://") :] if path.startswith("catalog://") else path
    name, sep, version = text.rpartition("@")
    if sep and name and version.isdigit():
        return name, int(version)
    if sep and name and version == "latest":
        return name, None
    return text, None


def compile_child(
    path: str, catalog: CatalogStore | None = None
) -> tuple[Program | None, dict[str, Any] | None]:
    """(the child's program, None), or (None, the summary of a child that could not
    start: no such file or catalog entry, or compile errors) — what embedded and distributed
    runtimes share. A path that is not a file is looked up in `catalog` (the store's catalog:
    `catalog://PATH@VERSION`, `PATH@VERSION`, or `PATH` for the latest version). A file in a
    legacy form is migrated as `noetlc migrate` does (`child_unit`)."""

    if path.startswith("catalog://") or not Path(path).is_file():
        name, version = catalog_reference(path)
        entry = None if catalog is None else catalog.entry(path=name, version=version)
        if entry is not None and entry.get("program") is not None:
            from noetlc.runtime.stored_program import decode_program

            return decode_program(entry["program"]), None  # keeps the stored bytes
        where = f"no playbook file {path} and no catalog entry {name}" + (
            f" version {version}" if version else ""
        )
        error = {"code": "NOE004", "message": where, "step": None}
        return None, {"execution_id": None, "status": "failed", "result": None, "error": error}
    unit = child_unit(path)
    if unit.reporter.has_errors or unit.program is None:
        first = next((d for d in unit.reporter.sorted() if d.is_error), unit.reporter.sorted()[0])
        where = f"{first.span}: " if first.span is not None else f"{path}: "
        hint = f" (hint: {first.hint})" if first.hint else ""
        error = {"code": first.code, "message": where + first.message + hint, "step": None}
        return None, {"execution_id": None, "status": "failed", "result": None, "error": error}
    return unit.program, None


def child_unit(path: str) -> CompilationUnit:
    """A child playbook file compiled as a parent is: as written, and when that has errors,
    with the legacy rewrites of `noetlc migrate` (what `check` then accepts), so a legacy
    child runs under its parent as it runs alone after `migrate`. The rewrites and other
    warnings are logged (logger `noetlc.children`), as `check` would print them."""
    from noetlc.compiler.pipeline import compile_file

    unit = compile_file(path)
    if unit.reporter.has_errors or unit.program is None:
        migrated = compile_file(path, options={"migrate": True})
        if not migrated.reporter.has_errors and migrated.program is not None:
            unit = migrated
    if not unit.reporter.has_errors:
        import logging

        log = logging.getLogger("noetlc.children")
        for d in unit.reporter.sorted():
            log.warning(
                "%s: %s[%s]: %s (a child playbook, compiled when its parent runs it)",
                d.span if d.span is not None else path,
                d.severity.value,
                d.code,
                d.message,
            )
    return unit


def cluster_catalog(db: Backend) -> CatalogStore | None:
    """The catalog in the cluster's database (one per database and process), or None for a
    backend without one (the in-memory test double)."""
    url = getattr(db, "url", None)
    if url is None or not hasattr(url, "dsn"):
        return None
    key = f"{url.dsn}#{url.schema}"
    with _CATALOGS_LOCK:
        if key not in _CATALOGS:
            from noetlc.runtime.postgres.catalog import PostgresCatalog

            _CATALOGS[key] = PostgresCatalog(url)
        return _CATALOGS[key]


class ChildRunner:
    """`ToolContext.run_playbook` for one parent execution; called from tool threads, it runs
    the database work on the worker's event loop."""

    def __init__(
        self,
        db: Backend,
        loop: asyncio.AbstractEventLoop,
        parent_id: str,
        poll: float,
        running_job: RunningJob | None = None,
        on_wait: Callable[[int], None] | None = None,
    ) -> None:
        self.db = db
        self.loop = loop
        self.parent_id = parent_id
        self.poll = poll
        self.running_job = running_job
        self.on_wait = on_wait  # +1 / -1 around the wait: the worker lends the slot meanwhile

    def __call__(
        self, path: str, workload: dict[str, Any], action_id: str, child_id: str, wait: bool = True
    ) -> dict[str, Any]:
        """The child's summary; with `wait=False` `{execution_id, status: started}` once it
        is offered to the servers (it runs on by itself, as NoETL's children do)."""
        from noetlc.runtime.stored_program import encode_program

        program, failed = compile_child(path, self._catalog())
        if program is None:
            assert failed is not None
            return failed
        child_workload = {**program.workload, **workload}
        child = self._start(
            child_id, action_id, program, encode_program(program), child_workload, wait
        )
        return asyncio.run_coroutine_threadsafe(child, self.loop).result()

    def _catalog(self) -> CatalogStore | None:
        return cluster_catalog(self.db)

    async def _start(
        self,
        child_id: str,
        action_id: str,
        image: Program,
        program: bytes,
        workload: dict[str, Any],
        wait: bool = True,
    ) -> dict[str, Any]:
        record = await self.db.events.execution(child_id)
        name = image.metadata.name
        if record is None:
            over = await self._over_budget(child_id, name, image)
            if over is not None:  # not started: the calling step fails with NOE858
                return {"execution_id": None, "status": "failed", "result": None, "error": over}
        if record is None or record["status"] == "running":
            # a first start, or a re-run of one that may have died half-way: each step is
            # idempotent (the row and the requested event are kept once, an offer of an
            # owned execution changes nothing); a finished child is not offered again. Its
            # row was created by `_over_budget` (`create_child`), or before
            first = requested_event(child_id, name, program, workload, self.parent_id)
            await self.db.events.append(child_id, [first])
            await self.db.owners.offer([child_id])
        if not wait:
            return {"execution_id": child_id, "status": "started"}
        if self.on_wait is not None:
            self.on_wait(1)
        try:
            return await self._summary(child_id, action_id)
        finally:
            if self.on_wait is not None:
                self.on_wait(-1)

    async def _over_budget(self, child_id: str, name: str, child: Program) -> dict[str, Any] | None:
        """The NOE858 error when a new child would be deeper than `child_depth` below its
        root, or past the root's `child_executions` (runtime/family.py: the root's budgets,
        read from its first event; the parent links from the database); else the child's
        row is created, counted with the root's tree under one lock (`create_child`)."""
        depth, root, seen = 1, self.parent_id, {self.parent_id}
        while True:
            record = await self.db.events.execution(root)
            parent = None if record is None else record.get("parent_execution_id")
            if not parent or str(parent) in seen:
                break
            depth, root = depth + 1, str(parent)
            seen.add(root)
        budgets = await self._budgets(root, child)
        limit = budgets["child_depth"]
        if limit and depth > limit:
            return over_budget_error("child_depth", depth, limit, f"a child of {self.parent_id}")
        limit = budgets["child_executions"]
        count = await self.db.events.create_child(child_id, name, self.parent_id, root, limit)
        if count is None:
            return None
        return over_budget_error(
            "child_executions", count, limit, f"the child executions of {root}"
        )

    async def _budgets(self, root_id: str, child: Program) -> dict[str, int]:
        """The root's budgets (its program is in its first event), kept per root; the
        child's own when the root's first event cannot be read."""
        budgets = _ROOT_BUDGETS.get(root_id)
        if budgets is None:
            first = await self.db.events.read(root_id, 0, 1)
            if not first or first[0]["name"] != EventName.EXECUTION_REQUESTED:
                return budgets_for(child.executor_spec)
            program, _ = program_from_requested(first[0])
            budgets = program.budgets
            if len(_ROOT_BUDGETS) >= 256:
                _ROOT_BUDGETS.pop(next(iter(_ROOT_BUDGETS)))
            _ROOT_BUDGETS[root_id] = budgets
        return budgets

    async def _summary(self, child_id: str, action_id: str) -> dict[str, Any]:
        cancel_asked = False
        while True:
            record = await self.db.events.execution(child_id)
            if record is not None and record["status"] != "running":
                break
            if not cancel_asked:
                cancel_asked = await self._cancel_if_caller_cancelled(child_id, action_id)
            seq = int(record["last_seq"]) if record else 0
            await self.db.events.wait_for_events(child_id, seq, self.poll)
        summary: dict[str, Any] = record["summary"] or {
            "execution_id": child_id,
            "status": record["status"],
            "result": None,
            "error": None,
        }
        return summary

    async def _cancel_if_caller_cancelled(self, child_id: str, action_id: str) -> bool:
        """Cancel the child when the job that waits on it was cancelled (the parent was
        cancelled or ended, or a `fail_fast` loop cancelled the iteration). The worker sets
        the job's flag when its heartbeat finds the job no longer held; only then is the job's
        row read, since a lost lease (someone else runs the job now) must not cancel the child
        the new lease waits for."""
        job = self.running_job(action_id) if self.running_job is not None else None
        if job is None or not job[1].is_set():
            return False
        state = await self.db.queue.get(job[0])
        if state is None or state.status != "cancelled":
            return False
        # a request the child's owning server answers with its one terminal event (nothing
        # once the child's log has ended)
        cancel = envelope(
            EventName.CANCEL_REQUESTED,
            Source.CLIENT,
            event_id=f"{child_id}:cancelled-with:{action_id}",
            ts=time.time(),
            payload={"reason": "the parent's calling job was cancelled"},
        )
        await self.db.events.append_if(child_id, [cancel])
        return True


class EmbeddedParent(Protocol):
    """What `EmbeddedChildren` reads of the embedded runtime that runs the parent
    (runtime/embedded.py)."""

    store: EventStore
    execution_id: str
    call_tool: ToolCall | None
    keychain_file: str | None
    depth: int  # levels below the root
    family: Family | None  # the budgets across the root's children (None: not found yet)
    active: dict[str, threading.Event]  # action_id -> cancel flag

    def find_family(self) -> None: ...


# `run_embedded` and `resume_embedded` (runtime/embedded.py, which imports this module only
# when a child runs: it is given them, not the other way round)
RunEmbedded = Callable[..., dict[str, Any]]


class EmbeddedChildren:
    """`kind: playbook` in the embedded runtime: child executions in the parent's process
    and store, each run by the calling action's pool thread (waited for) or by a thread of
    its own (`wait=False`), which the parent's run joins before it returns."""

    def __init__(self, parent: EmbeddedParent, run: RunEmbedded, resume: RunEmbedded) -> None:
        self.parent = parent
        self.run = run
        self.resume = resume
        self.detached: list[threading.Thread] = []  # children not waited for (`detach`)

    def join(self) -> None:
        """Wait for the children started and not waited for."""
        for thread in self.detached:
            thread.join()

    def start(
        self, path: str, workload: dict[str, Any], action_id: str, child_id: str, wait: bool = True
    ) -> dict[str, Any]:
        """`kind: playbook`: a child execution in this process and store, with parent_id. Its
        id is a function of the call: a resumed parent finds the child its first run started
        (finished: its summary; left running by the dead process: resumed), never a second.
        The calling action's cancel flag (set when the action is cancelled or the parent
        ended, `noetl-vm cancel` included) cancels a child waited for. With `wait=False` the
        child runs in a thread of its own (`detach`) and nothing of the parent stops it."""
        from noetlc.runtime.catalog import SQLiteCatalog
        from noetlc.runtime.event_store import SQLiteStore

        parent = self.parent
        store = parent.store
        catalog = SQLiteCatalog(store.path) if isinstance(store, SQLiteStore) else None
        try:
            payload, failed = compile_child(path, catalog)  # a file, else the store's catalog
        finally:
            if catalog is not None:
                catalog.close()
        if payload is None:
            assert failed is not None
            return failed
        if parent.family is None:
            parent.find_family()
        if not wait:
            return self.detach(payload, workload, child_id)
        return self._child(payload, workload, child_id, parent.active.get(action_id))

    def detach(
        self, payload: dict[str, Any] | Program, workload: dict[str, Any], child_id: str
    ) -> dict[str, Any]:
        """Start a child that is not waited for (NoETL's playbook tool without `return_step`):
        admitted by the budgets now, run by a thread the parent's run joins before it returns
        (the process ends when every execution it started has ended)."""
        parent = self.parent
        assert parent.family is not None
        if parent.store.execution(child_id) is None:  # a re-run call finds its child started
            over = parent.family.admit(parent.depth + 1)
            if over is not None:
                return {"execution_id": None, "status": "failed", "result": None, "error": over}
        thread = threading.Thread(
            target=self._child,
            args=(payload, workload, child_id, None, True),
            name=f"noetl-child-{child_id}",
        )
        self.detached.append(thread)
        thread.start()
        return {"execution_id": child_id, "status": "started"}

    def _child(
        self,
        payload: dict[str, Any] | Program,
        workload: dict[str, Any],
        child_id: str,
        stop: threading.Event | None,
        admitted: bool = False,
    ) -> dict[str, Any]:
        """Run (or resume, or find finished) the child `child_id` and give its summary."""
        from noetlc.runtime.event_store import SQLiteStore

        parent = self.parent
        store = parent.store
        if isinstance(store, SQLiteStore):
            # its own connection (this runs in a pool thread), fenced by the root's lease
            store = store.sibling()
        family = parent.family
        assert family is not None
        try:
            record = store.execution(child_id)
            if record is not None and record["status"] != "running" and record["summary"]:
                finished: dict[str, Any] = record["summary"]
                return finished
            if record is not None and record.get("program") is not None:
                return self.resume(
                    store,
                    child_id,
                    call_tool=parent.call_tool,
                    keychain_file=parent.keychain_file,
                    stop=stop,
                    family=family,
                    depth=parent.depth + 1,
                )
            over = None if admitted else family.admit(parent.depth + 1)
            if over is not None:  # not started: the calling step fails with NOE858
                return {"execution_id": None, "status": "failed", "result": None, "error": over}
            return self.run(
                payload,
                workload,
                store,
                execution_id=child_id,
                parent_id=parent.execution_id,
                call_tool=parent.call_tool,
                keychain_file=parent.keychain_file,
                stop=stop,
                family=family,
                depth=parent.depth + 1,
            )
        except OwnershipLost:
            raise
        except Exception as exc:  # the child's runtime broke (its store, a thread limit)
            return _fail_child(store, child_id, exc)
        finally:
            if store is not parent.store:
                store.close()


def _fail_child(store: EventStore, child_id: str, exc: Exception) -> dict[str, Any]:
    """A child whose runtime raised must not stay `running`: its log gets the one terminal
    event it lacks (none when it has one) and its row the status; the calling step fails."""
    from noetlc.runtime.logcheck import terminal_status

    error = {"code": "NOE850", "message": f"{type(exc).__name__}: {exc}", "step": None}
    summary: dict[str, Any] = {"execution_id": child_id, "status": "failed", "result": None}
    try:
        if store.execution(child_id) is not None:
            status = terminal_status(store.read(child_id))
            if status is None:
                status = "failed"
                failed = envelope(
                    EventName.EXECUTION_FAILED,
                    Source.SERVER,
                    event_id=f"{child_id}:runtime-failed",
                    payload={"error": error},
                )
                store.append(child_id, [failed])
            summary["status"] = status
            store.finish_execution(child_id, status, {**summary, "error": error})
    except Exception:  # the store itself is gone: `resume` of the root finishes the child
        pass
    return {**summary, "status": "failed", "error": error}
