"""`noetl-vm worker`: leases jobs, runs the pipeline VM and the tools, appends the events.

A worker has no inbound port: it leases up to `concurrency` jobs of its pool in batches
(`complete_and_lease`: finishing the last batch and leasing the next is one round trip),
runs each (a pipeline of only `noop` tasks inline, anything else in a thread), appends the
job's events — ids derived from `action_id` and the lease attempt, so a retried append adds
nothing — and only then completes the job. Leases are heartbeated every ttl/3; a job whose
lease was lost is told to stop and its events are not appended (its new holder runs it). A
re-leased job (attempt > 1) reads the `task.done` events its earlier attempts recorded and
replays them instead of calling those tools again. SIGTERM: stop leasing, let running jobs
finish for `grace` seconds, release the rest (no attempt is spent).
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from noetlc.runtime.embedded import playbook_folder
from noetlc.runtime.execute import EmitEvent, ToolEnv, execute, memo_from_events, noop_only
from noetlc.runtime.postgres.database import Database
from noetlc.runtime.queue import Lease
from noetlc.runtime.server import REQUESTED, RETRYABLE, _warn, new_owner, program_from_requested
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.vm.program import OP, Program


class Worker:
    def __init__(
        self,
        db: Database,
        *,
        owner: str | None = None,
        pool: str = "default",
        concurrency: int = 4,
        ttl: float = 15.0,
        poll: float = 1.0,
        grace: float = 10.0,
        keychain_file: str | None = None,
    ) -> None:
        self.db = db
        self.owner = owner or new_owner("worker")
        self.pool = pool
        self.concurrency = max(1, concurrency)
        self.ttl = ttl
        self.poll = poll
        self.grace = grace
        self.keychain_file = keychain_file
        self.envs: dict[str, ToolEnv] = {}  # per execution: its keychain and folder
        self.programs: dict[str, tuple[Program, dict[str, Any], dict[str, bool]]] = {}
        self.threads = ThreadPoolExecutor(self.concurrency, thread_name_prefix="noetl-worker")
        self.running: dict[str, tuple[Lease, asyncio.Task[bool], threading.Event]] = {}
        self.completed = 0
        self._inline_done: set[str] = set()

    async def run(self, stop: asyncio.Event) -> None:
        finished: list[Lease] = []
        next_heartbeat = time.monotonic() + self.ttl / 3
        try:
            while not stop.is_set():
                try:
                    finished = await self._round(finished, next_heartbeat)
                except RETRYABLE as exc:
                    _warn(self.owner, exc)  # the database went away: keep going
                    await asyncio.sleep(self.poll)
                if time.monotonic() >= next_heartbeat:
                    next_heartbeat = time.monotonic() + self.ttl / 3
        finally:
            await self._shutdown(finished)

    async def _round(self, finished: list[Lease], next_heartbeat: float) -> list[Lease]:
        """Complete what finished, lease more, heartbeat, wait; returns what finished now."""
        queue = self.db.queue
        free = self.concurrency - len(self.running)
        if free > 0 or finished:
            _, leases = await queue.complete_and_lease(
                finished, self.owner, pool=self.pool, limit=max(free, 0), ttl=self.ttl
            )
            self.completed += len(finished)
            finished = await self._run_inline(leases)
            for lease in leases:
                if lease.job_id in self._inline_done:
                    continue
                flag = threading.Event()
                task = asyncio.create_task(self._run_job(lease, flag))
                self.running[lease.job_id] = (lease, task, flag)
            self._inline_done.clear()
        if time.monotonic() >= next_heartbeat and self.running:
            held = await queue.heartbeat(
                [lease for lease, _, _ in self.running.values()], ttl=self.ttl
            )
            for job_id, (_, _, flag) in self.running.items():
                if job_id not in held:
                    flag.set()  # lost: someone else runs it now
        if finished:
            return finished  # complete them (and lease more) right away
        if self.running:
            tasks = [task for _, task, _ in self.running.values()]
            await asyncio.wait(tasks, timeout=self.ttl / 3, return_when=asyncio.FIRST_COMPLETED)
            await asyncio.sleep(0)  # let jobs finishing at the same moment join this batch
            finished.extend(self._collect())
        else:
            await queue.wait_for_work(self.pool, timeout=self.poll)
        return finished

    async def _run_inline(self, leases: list[Lease]) -> list[Lease]:
        """First-attempt jobs of noop-only pipelines: run them all now and append their
        events with one round trip per execution (batched leasing pays off here)."""
        by_execution: dict[str, list[dict[str, Any]]] = {}
        done: list[Lease] = []
        for lease in leases:
            if lease.attempt > 1:
                continue
            program, workload, inline = await self._program(lease.execution_id)
            p = lease.payload
            if not inline.get(p["step"]):
                continue
            events = by_execution.setdefault(lease.execution_id, [])
            first = len(events)
            execute(*_execute_args(lease, program, workload, events.append))
            now = time.time()
            for index, event in enumerate(events[first:]):
                event["event_id"] = f"{lease.action_id}:{lease.attempt}:{index}"
                event["ts"] = now
            done.append(lease)
            self._inline_done.add(lease.job_id)
        for execution_id, events in by_execution.items():
            await self.db.events.append(execution_id, events)
        return done

    def _redact(self, lease: Lease, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        keychain = self.envs[lease.execution_id].keychain
        if keychain is not None and keychain.has_secrets:
            for event in events:
                event["payload"] = keychain.redact(event.get("payload"))
        return events

    def _collect(self) -> list[Lease]:
        done: list[Lease] = []
        for job_id, (lease, task, flag) in list(self.running.items()):
            if task.done():
                del self.running[job_id]
                ok = not task.cancelled() and task.exception() is None and task.result()
                if ok and not flag.is_set():
                    done.append(lease)
        return done

    async def _shutdown(self, finished: list[Lease]) -> None:
        if self.running:
            tasks = [task for _, task, _ in self.running.values()]
            await asyncio.wait(tasks, timeout=self.grace)
            finished.extend(self._collect())
        if finished:
            await self.db.queue.complete(finished)
            self.completed += len(finished)
        if self.running:
            for _, task, flag in self.running.values():
                flag.set()
                task.cancel()
            await self.db.queue.release([lease for lease, _, _ in self.running.values()])
            self.running.clear()
        self.threads.shutdown(wait=False, cancel_futures=True)

    async def _program(self, execution_id: str) -> tuple[Program, dict[str, Any], dict[str, bool]]:
        cached = self.programs.get(execution_id)
        if cached is None:
            [first] = await self.db.events.read(execution_id, 0, 1)
            if first["name"] != REQUESTED:
                raise LookupError(f"execution {execution_id} has no {REQUESTED} event")
            program, workload = program_from_requested(first)
            inline = noop_only(program)
            cached = self.programs[execution_id] = (program, workload, inline)
            keychain = Keychain(program.payload.get("keychain") or [], file=self.keychain_file)
            self.envs[execution_id] = ToolEnv(keychain, playbook_folder(program), None)
            if len(self.programs) > 1000:
                self.programs.pop(next(iter(self.programs)))
        return cached

    async def _run_job(self, lease: Lease, flag: threading.Event) -> bool:
        """Run one job and append its events; True when it may be completed."""
        program, workload, inline = await self._program(lease.execution_id)
        p = lease.payload
        memo = None
        if lease.attempt > 1:
            memo = memo_from_events(await self.db.events.read(lease.execution_id)).get(
                lease.action_id
            )
        events: list[dict[str, Any]] = []
        flushed = 0
        loop = asyncio.get_running_loop()
        info = program.steps[p["step"]]
        # with several tasks, each finished task is committed at once: a re-leased attempt
        # replays it instead of calling the tool again
        eager = sum(1 for i in info.pipeline if i[0] == OP["TASK"]) > 1

        def emit(event: dict[str, Any]) -> None:
            nonlocal flushed
            event["event_id"] = f"{lease.action_id}:{lease.attempt}:{len(events)}"
            event["ts"] = time.time()
            events.append(event)
            if eager and event["name"] == "task.done" and not flag.is_set():
                try:
                    batch = self._redact(lease, events[flushed:])
                    asyncio.run_coroutine_threadsafe(
                        self.db.events.append(lease.execution_id, batch), loop
                    ).result()
                except Exception:  # the final append of the job retries them
                    return
                flushed = len(events)

        args = _execute_args(lease, program, workload, emit)
        if inline.get(p["step"]) and memo is None:
            execute(*args)
        else:

            def wait(seconds: float) -> bool:
                return flag.wait(seconds) if seconds > 0 else flag.is_set()

            env = self.envs[lease.execution_id]
            await loop.run_in_executor(
                self.threads, lambda: execute(*args, memo=memo, wait=wait, env=env)
            )
        if flag.is_set():
            return False
        await self.db.events.append(lease.execution_id, self._redact(lease, events[flushed:]))
        return True


def _execute_args(
    lease: Lease, program: Program, workload: dict[str, Any], emit: EmitEvent
) -> tuple[Program, str, str, str, dict[str, Any], int | None, Any, dict[str, Any], EmitEvent]:
    """`execute`'s positional arguments for a job: the command and the scope it carries."""
    p = lease.payload
    scope: dict[str, Any] = dict(p.get("results") or {})
    scope.update(workload=workload, ctx=p.get("ctx") or {}, execution_id=lease.execution_id)
    return (
        program,
        p["step"],
        p["step_run_id"],
        lease.action_id,
        p.get("args") or {},
        p.get("iteration"),
        p.get("item"),
        scope,
        emit,
    )
