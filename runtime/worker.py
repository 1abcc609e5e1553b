"""`noetl-vm worker`: leases jobs, runs the pipeline VM and the tools, appends the events.

A worker has no inbound port. Each round is one transaction (docs/distributed.md, "Round
trips and commits"): lease up to the free slots of `concurrency` from its pool, run the
first-attempt jobs of noop-only pipelines right there (again while every lease ran inline and
the batch was full, up to INLINE_ROUNDS batches), then complete the finished jobs and append
their events in one statement and commit — a job is never finished without its events, and
a crash rolls the leases back to the queue. Other jobs run in threads after the commit and
join the next round's commit. While a worker's jobs run in threads, a round is one
statement instead (finish the finished jobs, lease the next: "Statements per step"). Event
ids derive from `action_id` and the lease attempt, so a retried append adds nothing.
Templates see the `keychain` namespace resolved from the worker's own environment and
`--keychain` file; those values are redacted from the events.
Leases are heartbeated every ttl/3; a job whose lease was lost is told to stop and its events
are not appended (its new holder runs it). A re-leased job (attempt > 1) reads the
task outcomes its earlier attempts recorded (`task.done`) and replays them instead of calling those
tools again. SIGTERM: stop leasing, let running jobs finish for `grace` seconds, release the
rest (no attempt is spent). A job whose `kind: playbook` call waits on its child lends its
slot (not its thread) meanwhile, so the child's jobs find one even on `--concurrency 1`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import asyncpg

from noetlc.expr.runtime import RESOLVER_KEY
from noetlc.ir.events import EventName
from noetlc.runtime.backend import JOBS, Backend, Completion
from noetlc.runtime.bundles import Member, job_actions, size
from noetlc.runtime.children import ChildRunner, cluster_catalog
from noetlc.runtime.cluster import RETRYABLE, new_owner, warn_retrying
from noetlc.runtime.driver import REQUESTED, program_from_requested
from noetlc.runtime.embedded import playbook_folder
from noetlc.runtime.execute import EmitEvent, ToolEnv, execute, memo_from_events, noop_only
from noetlc.runtime.logs import ExecutionLogs, Row
from noetlc.runtime.queue import Lease
from noetlc.runtime.results import (
    References,
    StorageOverBudget,
    over_budget_event,
    reference_limit,
)
from noetlc.runtime.stored_budget import StoredBytes
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.vm.loaded_program import OP, LoadedProgram
from noetlc.vm.protocol import Command, CommandKind, Event

# one line per execution a round finished jobs of (`noetl-vm worker --log-level`)
log = logging.getLogger("noetlc.worker")


class Worker:
    def __init__(
        self,
        db: Backend,
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
        self.executions: dict[str, Known] = {}  # the last 1,000 executions seen
        # a job waiting on a child gives its slot back and keeps its thread (below)
        self.threads = ThreadPoolExecutor(
            self.concurrency + MAX_WAITING, thread_name_prefix="noetl-worker"
        )
        self.waiting = 0  # jobs whose `kind: playbook` call waits on a child
        self._slot_freed = asyncio.Event()
        self.running: dict[str, tuple[Lease, asyncio.Task[Finished | None], threading.Event]] = {}
        self.completed = 0
        # completions the queue refused (the lease was no longer current, or the job was
        # cancelled: fencing), and leases a heartbeat found lost (their jobs told to stop)
        self.refused = 0
        self.lost = 0
        # finished jobs and their events, committed by the next round
        self._finished: list[Completion] = []
        self._more = False  # the last pick was full: pick again without waiting
        self._job_size = 1  # actions per job in the last pick (bundles: several)
        # the last job this worker got ran inline: its rounds pick in a transaction
        # (`_commit`) until it gets one that does not
        self._inline_seen = False
        # the last lease or pick got all it asked for: more jobs may be queued (a stream of
        # inline jobs is picked and finished in transactions, many per commit)
        self._burst = False
        # reference-first results: large task results stored, references resolved
        self.results = db.result_store()
        self.stored = StoredBytes(db.events)  # the executions' `stored_bytes` budgets
        self._next_heartbeat = 0.0  # when the running jobs' leases are renewed next
        # this worker asked to be woken for the next job (`_idle`): a later round that takes
        # jobs withdraws it, so no enqueue wakes a worker that is not waiting
        self._waiter = False

    async def run(self, stop: asyncio.Event) -> None:
        self._next_heartbeat = time.monotonic() + self.ttl / 3
        heartbeats = asyncio.create_task(self._heartbeats(stop))
        try:
            while not stop.is_set():
                try:
                    await self._round()
                except ROUND_RETRYABLE as exc:
                    # the database went away, or the round lost a deadlock to a cancel: it
                    # rolled back whole (the finished jobs are kept for the next round)
                    warn_retrying(self.owner, exc)
                    await asyncio.sleep(self.poll)
        finally:
            heartbeats.cancel()
            await asyncio.gather(heartbeats, return_exceptions=True)
            await self._shutdown()

    async def _heartbeats(self, stop: asyncio.Event) -> None:
        """Renew the running jobs' leases every ttl/3, by the clock, on a connection of its
        own: a round is a transaction of several statements, and on a slow database link
        (200 ms round trips, lost segments) waiting for it let leases expire under jobs that
        were running fine (tests/postgres/test_pg_partitions.py)."""
        while not stop.is_set():
            wait = self._next_heartbeat - time.monotonic()
            if wait > 0:
                await asyncio.sleep(min(wait, self.ttl / 3))
                continue
            self._next_heartbeat = time.monotonic() + self.ttl / 3
            leases = [lease for lease, _, _ in self.running.values()]
            if not leases:
                continue
            try:
                held = await self.db.queue.heartbeat(leases, ttl=self.ttl)
            except ROUND_RETRYABLE as exc:
                warn_retrying(self.owner, exc)
                continue
            for lease in leases:
                entry = self.running.get(lease.job_id)
                if entry is not None and lease.job_id not in held and not entry[2].is_set():
                    entry[2].set()  # lost: someone else runs it now
                    self.lost += 1

    async def _round(self) -> None:
        """One transaction: pick, run what runs inline, commit; start the other leases;
        heartbeat; wait for running jobs or new work."""
        notes = self.db.notifications
        await notes.ensure_listening(JOBS)
        # registered before the pick: an enqueue committed after it still wakes us
        woken = notes.register(JOBS, self.pool)
        try:
            await self._round_registered(woken)
        finally:
            notes.unregister(JOBS, self.pool, woken)

    async def _round_registered(self, woken: asyncio.Event) -> None:
        self._slot_freed.clear()  # before `free` is counted: a later lent slot wakes the wait
        # the leases this round takes expire `ttl` after its transaction began (PostgreSQL's
        # now()), not after it committed: their first renewal counts from here
        began = time.monotonic()
        free = self._slots() - self._busy()
        idle = not self.running
        self._more = False
        if free > 0 or self._finished:
            for lease in await self._commit(max(free, 0)):
                flag = threading.Event()
                task = asyncio.create_task(self._run_job(lease, flag))
                self.running[lease.job_id] = (lease, task, flag)
        if idle or not self.running:
            self._next_heartbeat = began + self.ttl / 3  # leases taken now need none yet
        # the leases of running jobs are renewed by `_heartbeats`, by the clock
        if self._finished or (self._more and self._busy() < self._slots()):
            return  # commit them, or lease more, right away
        if self.running:
            tasks = [task for _, task, _ in self.running.values()]
            timeout = max(0.0, self._next_heartbeat - time.monotonic())
            freed = asyncio.ensure_future(self._slot_freed.wait())
            await asyncio.wait(
                [*tasks, freed], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            freed.cancel()
            await asyncio.sleep(0)  # let jobs finishing at the same moment join this batch
            self._collect()
        else:
            # the pick found the queue drained: sleep until the next enqueue notifies (or the
            # polling fallback). Not `wait_for_work`: it counts the jobs other workers' open
            # rounds have picked as ready, and idle workers would spin on them.
            await self.db.notifications.sleep_on(woken, self.poll)

    async def _commit(self, limit: int) -> list[Lease]:
        """The round's commit: `_commit_direct` (one statement), or `_commit_round` (a
        transaction) while the jobs this worker gets run inline or are bundles. Inline jobs
        commit with their results in the transaction that picked them (one commit per job
        batch); a job leased in one statement commits twice, its lease and its finish,
        which costs a job run in a thread nothing (it commits its lease before it runs), and
        an inline job that comes alone (a chain of steps: the queue holds one job at a
        time) two statements instead of a transaction's four (BEGIN, pick, finish, COMMIT);
        the lease's commit does not wait for the WAL flush (`finish_and_lease_jobs`)."""
        if self._job_size > 1 or (self._inline_seen and self._burst):
            return await self._commit_round(limit)
        return await self._commit_direct(limit)

    async def _commit_direct(self, limit: int) -> list[Lease]:
        """A round of one statement in autocommit: complete the finished jobs (with their
        events) and lease up to `limit` jobs — no BEGIN, no pick, no COMMIT, and a worker
        that finds nothing sends that one statement only. Jobs that run inline are run now;
        when the lease was full they are finished at once by a transaction round, which picks
        more of them, and the rounds after it are transactions while the picks are full and
        no job runs in a thread (`_inline_seen`, `_burst`); else a second statement finishes
        them (and leases what came meanwhile). A bundle larger than the free slots goes back
        to the queue (no attempt spent)."""
        threaded, budget = await self._direct(limit, [])
        if self._finished and self._burst:
            # inline jobs ran and more may be queued: finished now by a transaction round,
            # which picks more of them (a stream of noop jobs commits many per transaction)
            threaded += await self._commit_round(max(budget, 0))
        elif self._finished:
            # a lone inline job ran: finished by one statement, which leases the next ones
            # (inline ones among them run now and are finished by the next round)
            more, _ = await self._direct(max(budget, 0), threaded)
            threaded += more
        return threaded

    async def _direct(self, limit: int, started: list[Lease]) -> tuple[list[Lease], int]:
        """One statement of `_commit_direct`: finish, lease up to `limit` jobs, run the inline
        ones (`_finished` then holds their results); returns the leases to run in threads and
        the slots left. `started`: leases this round already took for threads."""
        done = await self.stored.admit(list(self._finished), self._refs)
        idle = 0.0 if self.running or started else self._idle()
        accepted, leases = await self.db.queue.finish_and_lease(
            done, self.owner, pool=self.pool, limit=limit, ttl=self.ttl, idle=idle
        )
        self._waiter = idle > 0 and not leases
        self._finished = []
        self._accepted(done, accepted)
        threaded: list[Lease] = []
        left: list[Lease] = []
        budget = limit
        handled = 0
        try:
            for lease in leases:
                need = self._job_size = size(lease.payload)
                known = await self._known(lease.execution_id)
                if self._inline(lease, known):
                    self._inline_seen = True  # rounds pick in a transaction from now on
                    self._finished.append((lease, self._run_inline(lease, known)))
                elif need <= budget or not (self.running or threaded or started):
                    threaded.append(lease)
                    budget -= need
                else:
                    left.append(lease)
                handled += 1
        except BaseException:
            # the leases not started go back to the queue (else they would expire)
            with contextlib.suppress(Exception):
                await self.db.queue.release(threaded + left + leases[handled:])
            raise
        if left:
            await self.db.queue.release(left)
        self._more = len(leases) == limit > 0 and not left
        self._burst = len(leases) == limit > 0
        return threaded, budget

    async def _commit_round(self, limit: int) -> list[Lease]:
        """One transaction (one WAL flush): pick up to `limit` jobs (row locks) and run the
        inline ones at once, again while every job ran inline (up to INLINE_ROUNDS batches);
        lease the others; then append the events of everything finished and complete it
        (never one without the other). Returns the leases to run in threads. If
        anything fails, the transaction rolls back: the jobs return to the queue and what ran
        inline is run again by whoever takes it (same event ids, so nothing is logged twice);
        the threaded jobs' results are kept for the next try."""
        done = list(self._finished)
        ran: list[Completion] = []
        threaded: list[Lease] = []
        budget = limit  # free slots: a job in a thread takes one per action (a bundle's members)
        # actions run inline per round at most: as many as INLINE_ROUNDS full picks of
        # one-action jobs, so a wave of bundles spreads over the workers and rounds stay short
        cap = INLINE_ROUNDS * limit
        inline = 0
        async with self.db.queue.round(self.owner, pool=self.pool, ttl=self.ttl) as tx:
            for _ in range(INLINE_ROUNDS):
                # rows enough to reach the cap at the job size seen last
                want = min(limit, -(-(cap - inline) // self._job_size))
                picked = await tx.pick(want)
                waiting: list[Lease] = []
                left: list[Lease] = []
                capped = False
                for lease in picked:
                    need = self._job_size = size(lease.payload)
                    known = await self._known(lease.execution_id)
                    if self._inline(lease, known):
                        if capped or (inline and inline + need > cap):
                            capped = True
                            left.append(lease)  # the next round runs it
                            continue
                        ran.append((lease, self._run_inline(lease, known)))
                        inline += need
                    # a bundle larger than the free slots waits for them, unless this worker
                    # would otherwise be idle
                    elif need <= budget or not (self.running or waiting or threaded):
                        waiting.append(lease)
                        budget -= need
                    else:
                        left.append(lease)
                threaded.extend(await tx.lease_picked(waiting))
                if left:
                    await tx.unpick(left)  # back to the queue, no attempt spent
                # the queue may hold more (a full pick, or the cap reached: the next round
                # goes on at once); a bundle left for want of slots waits for the running
                # jobs (the round's wait), not for another pick
                self._more = capped or (len(picked) == want > 0 and not left)
                if threaded or left or not self._more or inline >= cap:
                    break  # the queue is drained, or slots are taken now
            done = await self.stored.admit(done, self._refs)
            ran = await self.stored.admit(ran, self._refs)
            # a round transaction does not register its worker as waiting (it is woken by the
            # pool's channel): measured, registering at the end of rounds of inline streams
            # and bundles raised PostgreSQL's CPU per task by a third in the loop benchmark,
            # where every enqueue has more jobs than idle workers anyway. It withdraws a
            # registration its worker made in a one-statement round.
            accepted = set()
            if done or ran or self._waiter:
                accepted = await tx.finish(done, ran)
                self._waiter = False
        if ran or threaded:  # an empty round tells nothing of the jobs to come
            self._inline_seen = bool(ran)
        self._burst = self._more
        self._accepted(done, accepted, ran)
        self._finished = []
        return threaded

    def _accepted(
        self, done: list[Completion], accepted: set[str], ran: list[Completion] | None = None
    ) -> None:
        """Count a round's completions; say so when some were refused (fencing)."""
        self.completed += len(accepted)
        stale = sum(1 for lease, _ in done if lease.job_id not in accepted)
        if stale:
            self.refused += stale
            print(
                f"worker {self.owner}: {stale} completion(s) refused: the lease was no longer"
                " current or the job was cancelled",
                file=sys.stderr,
                flush=True,
            )
        if log.isEnabledFor(logging.INFO):
            jobs: dict[str, int] = {}
            for lease, _ in (*done, *(ran or ())):
                if lease.job_id in accepted:
                    jobs[lease.execution_id] = jobs.get(lease.execution_id, 0) + 1
            for execution_id, n in jobs.items():
                log.info("%s: execution %s: %d job(s) done", self.owner, execution_id, n)

    def _finish(self, lease: Lease, known: Known, events: list[Event]) -> None:
        self._finished.append((lease, _redact(known, events)))

    @staticmethod
    def _inline(lease: Lease, known: Known) -> bool:
        """A first-attempt job of a noop-only pipeline runs right here, in the round."""
        return lease.attempt == 1 and bool(known.inline.get(lease.payload["step"]))

    @staticmethod
    def _run_inline(lease: Lease, known: Known) -> list[Event]:
        """Run an inline job (`_inline`): its events, ready to commit."""
        events = []
        for member in job_actions(lease.action_id, lease.payload):
            emitted: list[Event] = []
            execute(*_execute_args(lease, known, emitted.append, member))
            now = time.time()
            for index, event in enumerate(emitted):
                # ids from the action and the lease attempt: a retried append adds nothing
                event = event._replace(event_id=f"{member[0]}:{lease.attempt}:{index}", ts=now)
                events.append(known.shrink(event))
        return _redact(known, events)

    def _collect(self) -> None:
        for job_id, (lease, task, flag) in list(self.running.items()):
            if task.done():
                del self.running[job_id]
                done = None if task.cancelled() or task.exception() else task.result()
                if done is not None and not flag.is_set():
                    self._finish(lease, *done)

    async def _shutdown(self) -> None:
        if self.running:
            tasks = [task for _, task, _ in self.running.values()]
            await asyncio.wait(tasks, timeout=self.grace)
            self._collect()
        if self._finished:
            await self._commit(0)
        if self._waiter:  # no enqueue should count on this worker any more
            with contextlib.suppress(Exception):
                await self.db.queue.finish_and_lease([], self.owner, pool=self.pool, limit=0)
        if self.running:
            for _, task, flag in self.running.values():
                flag.set()
                task.cancel()
            await self.db.queue.release([lease for lease, _, _ in self.running.values()])
            self.running.clear()
        self.threads.shutdown(wait=False, cancel_futures=True)
        self.results.close()
        if self.refused or self.lost:
            print(
                f"worker {self.owner} stopped: {self.completed} job(s) completed,"
                f" {self.refused} completion(s) refused, {self.lost} lease(s) found lost",
                file=sys.stderr,
                flush=True,
            )

    def _credentials(self, execution_id: str) -> Any:
        """Keychain entries from the service's credential store, when this worker has the
        credential key in its environment (`NOETL_CREDENTIAL_KEY`); else None."""
        from noetlc.runtime.credentials import KEY_ENV, Cipher, StoreCredentials, load_key

        if not os.environ.get(KEY_ENV):
            return None
        catalog = cluster_catalog(self.db)
        if catalog is None:
            return None
        store = StoreCredentials(catalog, Cipher(load_key()))
        return store.provider(f"keychain:{self.owner}", execution_id)

    async def _known(self, execution_id: str) -> Known:
        known = self.executions.get(execution_id)
        if known is None:
            [first] = await self.db.events.read(execution_id, 0, 1)
            if first["name"] != REQUESTED:
                raise LookupError(f"execution {execution_id} has no {REQUESTED} event")
            program, workload = program_from_requested(first)
            keychain = Keychain(
                list(program.keychain),
                file=self.keychain_file,
                provider=self._credentials(execution_id),
            )
            loop = asyncio.get_running_loop()

            def store_logs(rows: list[Row], execution_id: str = execution_id) -> None:
                # from a tool's thread; waits, so the output is stored before the job ends
                asyncio.run_coroutine_threadsafe(
                    self.db.logs.append(execution_id, rows), loop
                ).result()

            known = self.executions[execution_id] = Known(
                program,
                workload,
                noop_only(program),
                ToolEnv(
                    keychain,
                    playbook_folder(program),
                    ChildRunner(
                        self.db,
                        loop,
                        execution_id,
                        self.poll,
                        self._running_job,
                        self._child_wait,
                    ),
                    logs=ExecutionLogs(store_logs, keychain.redact),
                    worker=self.owner,
                ),
                keychain.namespace(),
                # one result's budget here; the execution's total with the others'
                # (runtime/stored_budget.py)
                References(
                    self.results,
                    reference_limit(program.executor_spec),
                    {"result_bytes": program.budgets["result_bytes"]},
                ),
            )
            limit = program.budgets["stored_bytes"]
            if limit:
                known.refs.share_total(limit)
            if len(self.executions) > 1000:
                self.executions.pop(next(iter(self.executions)))
        return known

    def _idle(self) -> float:
        """How long a worker about to sleep for want of jobs stays registered as waiting (it
        renews the registration at every `poll`): past it, a worker that died asleep is no
        longer woken in place of a live one."""
        return 2 * self.poll + 1.0

    def _refs(self, execution_id: str) -> References | None:
        known = self.executions.get(execution_id)
        return None if known is None else known.refs

    def _slots(self) -> int:
        return self.concurrency + min(self.waiting, MAX_WAITING)

    def _child_wait(self, delta: int) -> None:
        """A `kind: playbook` call starts (+1) or stops (-1) waiting on its child, on this
        loop: while it waits its slot serves other jobs — the child's among them — so one
        worker with `--concurrency 1` runs nested children instead of deadlocking."""
        self.waiting += delta
        if delta > 0:
            self._slot_freed.set()  # the round's wait: lease into the freed slot now

    def _running_job(self, action_id: str) -> tuple[str, threading.Event] | None:
        """The job this worker runs for `action_id`, and its cancel flag (a waiting
        `kind: playbook` call asks, on this loop)."""
        for lease, _, flag in self.running.values():
            if any(m[0] == action_id for m in job_actions(lease.action_id, lease.payload)):
                return lease.job_id, flag
        return None

    def _busy(self) -> int:
        """The slots the running jobs take: one per action (a bundle's members)."""
        return sum(size(lease.payload) for lease, _, _ in self.running.values())

    async def _run_job(self, lease: Lease, flag: threading.Event) -> Finished | None:
        """Run one job — a bundle's members side by side — and return its events, not
        committed yet, or None when its lease was lost."""
        known = await self._known(lease.execution_id)
        memos = None
        if lease.attempt > 1:
            memos = memo_from_events(await self.db.events.read(lease.execution_id))
        runs = job_actions(lease.action_id, lease.payload)
        if len(runs) == 1:
            outs = [await self._run_action(lease, flag, known, runs[0], memos)]
        else:
            outs = await asyncio.gather(
                *(self._run_action(lease, flag, known, member, memos) for member in runs)
            )
        if flag.is_set():
            return None
        return known, [event for out in outs for event in out]

    async def _run_action(
        self,
        lease: Lease,
        flag: threading.Event,
        known: Known,
        member: Member,
        memos: dict[str, Any] | None,
    ) -> list[Event]:
        """One action of a job: its events not committed yet (the finished tasks of a
        pipeline of several are committed at once, fenced by the lease)."""
        program, inline = known.program, known.inline
        p = lease.payload
        action_id = member[0]
        memo = None if memos is None else memos.get(action_id)
        events: list[Event] = []
        flushed = 0
        loop = asyncio.get_running_loop()
        info = program.steps[p["step"]]
        # with several tasks, each finished task is committed at once: a re-leased attempt
        # replays it instead of calling the tool again
        eager = sum(1 for i in info.pipeline if i[0] == OP["TASK"]) > 1
        threaded = not (inline.get(p["step"]) and memo is None)  # else on this loop: no wait

        def emit(event: Event) -> None:
            nonlocal flushed
            event = event._replace(
                event_id=f"{action_id}:{lease.attempt}:{len(events)}", ts=time.time()
            )
            event = known.shrink(event)  # stored before its reference is logged
            events.append(event)
            # the action's `task.started` is committed at once (a console shows it running);
            # with several tasks, each finished task too (a re-leased attempt replays it)
            now = (threaded and event.name == EventName.TASK_STARTED) or (
                eager and event.name == EventName.TASK_DONE
            )
            if now and not flag.is_set():
                try:
                    batch = _redact(known, events[flushed:])
                    held = asyncio.run_coroutine_threadsafe(
                        self.db.queue.append_fenced(lease, batch), loop
                    ).result()
                except Exception:  # the final append of the job retries them
                    return
                if not held:
                    flag.set()  # the lease was lost: stop, someone else runs the job now
                    return
                flushed = len(events)

        env = known.env
        args = _execute_args(lease, known, emit, member)
        if not threaded:
            execute(*args)
        else:

            def wait(seconds: float) -> bool:
                return flag.wait(seconds) if seconds > 0 else flag.is_set()

            handed_at = time.time()
            await loop.run_in_executor(
                self.threads,
                lambda: execute(*args, memo=memo, wait=wait, env=env, handed_at=handed_at),
            )
        return events[flushed:]


ROUND_RETRYABLE = (*RETRYABLE, asyncpg.DeadlockDetectedError)

# jobs waiting on children that give their slot back (each keeps a thread); past this many,
# waiting jobs hold their slots again
MAX_WAITING = 64

# batches of inline (noop-only) jobs leased and run in one transaction: `concurrency` jobs per
# batch, so one WAL flush covers up to this many times as many jobs (docs/distributed.md)
INLINE_ROUNDS = 4


class Known:
    """What a worker keeps per execution: read once from its first event."""

    __slots__ = ("env", "inline", "keychain", "program", "refs", "workload")

    def __init__(
        self,
        program: LoadedProgram,
        workload: dict[str, Any],
        inline: dict[str, bool],
        env: ToolEnv,
        keychain: dict[str, Any],
        refs: References,
    ) -> None:
        self.program = program
        self.workload = workload
        self.inline = inline  # step -> runs inline (noop-only pipeline)
        self.env = env
        self.keychain = keychain  # the templates' `keychain` namespace
        self.refs = refs

    def shrink(self, event: Event) -> Event:
        """A result over `limits.max_payload_bytes` goes to the result table; the event
        keeps its reference (as in embedded mode). A result over the `result_bytes` budget
        becomes the action's NOE858 failure (runtime/results.py)."""
        if self.refs.active and event.name in SHRUNK:
            keychain = self.env.keychain
            if keychain is not None and keychain.has_secrets and isinstance(event.payload, dict):
                redacted = keychain.redact(event.payload)  # a stored result is redacted too
                event.payload.clear()
                event.payload.update(redacted)
            try:
                self.refs.shrink_event(event)
            except StorageOverBudget as over:
                return over_budget_event(event, over.error)
        return event


Finished = tuple[Known, list[Event]]

# the worker events that carry results (a task's outcome, or the action's result)
SHRUNK = frozenset({EventName.TASK_DONE, EventName.STEP_DONE, EventName.LOOP_ITERATION_DONE})


def _redact(known: Known, events: list[Event]) -> list[Event]:
    keychain = known.env.keychain
    if keychain is not None and keychain.has_secrets:
        return [e._replace(payload=keychain.redact(e.payload)) for e in events]
    return events


def _execute_args(
    lease: Lease, known: Known, emit: EmitEvent, member: Member
) -> tuple[LoadedProgram, Command, dict[str, Any], EmitEvent]:
    """`execute`'s positional arguments for one action of a job (`member`: its action id,
    iteration and item): the command and the scope the job carries, plus the `keychain`
    namespace from this worker's own keychain (never in the job's payload)."""
    p = lease.payload
    scope: dict[str, Any] = dict(p.get("results") or {})
    scope.update(workload=known.workload, ctx=p.get("ctx") or {}, execution_id=lease.execution_id)
    scope["keychain"] = known.keychain
    scope[RESOLVER_KEY] = known.refs.resolve
    command = Command(
        CommandKind.RUN.value,
        p["step"],
        p["step_run_id"],
        p.get("args") or {},
        member[0],
        member[1],
        member[2],
    )
    return (known.program, command, scope, emit)
