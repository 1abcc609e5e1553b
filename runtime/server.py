"""`noetl-vm server`: runs the control VMs of distributed executions (docs/distributed.md).

Any number of servers share one PostgreSQL. Each running execution is owned by one server at
a time (an ownership lease, renewed every ttl/3); a server claims new submissions and the
executions of servers whose lease expired, rebuilds their control VM from the event log
(replay), appends the server events the log lacks, and (re-)enqueues the commands still
outstanding — job ids are action ids, so nothing is enqueued twice. Then, for every owned
execution, the new input events are read (woken by the workers' NOTIFY — not by our own —
with polling as the fallback), fed to the VM, and its events and the jobs they cause are
committed in one transaction (`append_and_enqueue`), left in flight while the next round
reads and feeds (rounds commit in order); a finished execution is closed and retired.
Noop-only steps are not enqueued: they run inside the round, as embedded mode runs them, and
their events join the round's commit (`_run_inline`; `inline=False` enqueues them). Every
server also reaps expired job leases (`reaper.py`): a job out of attempts becomes a failure
event for its step or iteration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from noetlc.diagnostics.errors import UserError
from noetlc.runtime.backend import ANY_KEY, EVENTS, EXECUTIONS, Backend
from noetlc.runtime.bundles import PER_JOB, SPREAD, BundleIndex, build_jobs, covering_jobs
from noetlc.runtime.cluster import RETRYABLE, new_owner, warn_retrying
from noetlc.runtime.driver import REQUESTED, Driver, program_from_requested
from noetlc.runtime.execute import execute, noop_only
from noetlc.runtime.queue import JobSpec
from noetlc.runtime.reaper import reap_expired
from noetlc.runtime.timers import Timers, started_times
from noetlc.vm.control import ControlVM
from noetlc.vm.protocol import (
    INPUT_NAMES,
    INPUT_SOURCES,
    Command,
    CommandKind,
    Event,
    EventName,
    Source,
    envelope,
    is_input,
)

# one line per execution owned and ended (`noetl-vm server --log-level`)
log = logging.getLogger("noetlc.server")

T = TypeVar("T")
STEP_DEADLINE = 30.0  # seconds one VM step (a batch of inputs, or a replay) may take


class StepDeadline(UserError):
    """A VM step ran past the server's deadline (NOE859)."""


@dataclass
class Owned:
    execution_id: str
    driver: Driver
    after_seq: int
    server_events: int  # the server events the log holds (the VM numbers them from 1)
    timers: Timers
    # step -> its pipeline runs here, inside the round (noop-only); empty: nothing does
    inline: dict[str, bool]
    # ids of the action events we ran inline and appended past a gap in the log (another
    # process appended in between), or whose commit is in flight: a read may return them;
    # they are not fed again
    appended_inline: set[str]
    # the last round's commit, still in flight: the next round reads and feeds the VM
    # meanwhile, and commits after it (`advance`); None when there is none
    committing: asyncio.Future[bool] | None = None
    # the job of each action of a bundle in flight (a cancel names actions; runtime/bundles.py)
    bundles: BundleIndex = field(default_factory=BundleIndex)
    # its jobs were cancelled because it ended (before the terminal event was appended)
    ended: bool = False

    @property
    def vm(self) -> ControlVM:
        return self.driver.vm


class Server:
    def __init__(
        self,
        db: Backend,
        *,
        owner: str | None = None,
        ttl: float = 15.0,
        poll: float = 1.0,
        claim_limit: int = 50,
        pool: str = "default",
        step_deadline: float | None = STEP_DEADLINE,
        inline: bool = True,
        per_job: int = PER_JOB,
        spread: int = SPREAD,
    ) -> None:
        self.db = db
        # loop iterations per job at most, and jobs per loop and round at least (bundles.py)
        self.per_job = per_job
        self.spread = spread
        self.step_deadline = step_deadline
        # run noop-only steps inside the round instead of enqueueing them (see `_inline`)
        self.inline = inline
        self.owner = owner or new_owner("server")
        self.ttl = ttl
        self.poll = poll
        self.claim_limit = claim_limit
        self.pool = pool
        self.owned: dict[str, Owned] = {}
        self.finished = 0
        self.refused = 0  # executions failed because their program or log is unusable
        self._next_renew = 0.0
        self._next_reap = 0.0
        self._next_claim = 0.0
        self.offered = True
        self._background: set[asyncio.Future[Any]] = set()
        # execution id -> its adoption or round in progress (`tick`)
        self._busy: dict[str, asyncio.Task[bool]] = {}
        # the tasks a round stopped waiting for (past its slice): their end wakes the server
        self._late: set[asyncio.Task[bool]] = set()
        # set by our own appends made outside `tick` (timers, a round's commit landing)
        self._wake = asyncio.Event()
        # reference-first results the control VMs read (arcs, step args, the summary)
        self.results = db.result_store()

    async def run(self, stop: asyncio.Event) -> None:
        notes = self.db.notifications
        # our own appends need not wake us (we know what we wrote); timers wake us directly
        notes.ignore_own = True
        keeper = asyncio.create_task(self._keep_leases(stop))
        try:
            while not stop.is_set():
                await notes.ensure_listening()  # again after the database came back
                wake_events = notes.register(EVENTS, ANY_KEY)
                wake_offers = notes.register(EXECUTIONS, ANY_KEY)
                self._wake.clear()
                try:
                    try:
                        progressed = await self.tick(ROUND_SLICE)
                    except RETRYABLE as exc:
                        # the database went away: keep our state, try again (the leases
                        # may be lost meanwhile; renew() tells)
                        warn_retrying(self.owner, exc)
                        progressed = False
                    if not progressed:
                        # never past the next lease renewal or reaping, whatever the polling
                        due = min(self._next_renew, self._next_reap) - time.monotonic()
                        await _first(
                            [
                                wake_events.wait(),
                                wake_offers.wait(),
                                self._wake.wait(),
                                stop.wait(),
                            ],
                            max(0.0, min(self.poll, due)),
                        )
                    if wake_offers.is_set():
                        self.offered = True
                finally:
                    notes.unregister(EVENTS, ANY_KEY, wake_events)
                    notes.unregister(EXECUTIONS, ANY_KEY, wake_offers)
        finally:
            keeper.cancel()
            for task in list(self._busy.values()):  # a VM step past the stop: dropped
                task.cancel()
            if self._busy:
                await asyncio.wait(list(self._busy.values()), timeout=5.0)
            for owned in self.owned.values():
                owned.timers.close()
                with contextlib.suppress(Exception):
                    await self._settle(owned)  # the last round's commit lands first
            if self.owned:
                await self.db.owners.release(self.owner, list(self.owned))
            self.results.close()

    async def tick(self, slice_: float | None = None) -> bool:
        """One round: claim, renew, advance every owned execution, reap. True if any work.

        Each execution's adoption or round is a task of its own (one at a time per
        execution): with `slice_`, the round waits that long for them and goes on, so one
        execution whose VM step is slow (a poison guard, up to its budget) does not hold the
        others' rounds — its task ends in the background and wakes the server. Without,
        the round waits for every task (what a test that drives `tick` expects)."""
        progressed = False
        now = time.monotonic()
        await self._renew_due()
        started: list[asyncio.Task[bool]] = []
        if self.offered or now >= self._next_claim:
            # claims cost a round trip: only when offers were announced, or once per poll
            self.offered = False
            self._next_claim = now + self.poll
            claims = await self.db.owners.claim(self.owner, limit=self.claim_limit, ttl=self.ttl)
            for claim in claims:
                execution_id = claim.execution_id
                if execution_id not in self.owned and execution_id not in self._busy:
                    started.append(self._run_for(execution_id, self._adopted(execution_id)))
            if len(claims) == self.claim_limit:
                self.offered = True  # there may be more
        for execution_id in list(self.owned):
            owned = self.owned.get(execution_id)
            if owned is None or execution_id in self._busy:  # lost meanwhile, or busy
                continue
            started.append(self._run_for(execution_id, self._advance_or_refuse(owned)))
        if started:
            done, late = await asyncio.wait(started, timeout=slice_)
            self._late.update(late)  # no await since the wait: none of them has ended
            for task in done:
                progressed |= task.result()
        if now >= self._next_reap:
            self._next_reap = now + min(self.ttl / 3, 5.0)
            progressed |= await self.reap()
        return progressed

    def _run_for(self, execution_id: str, work: Any) -> asyncio.Task[bool]:
        """Run an execution's adoption or round as a task; the server is woken when one the
        round stopped waiting for ends (a database error is raised there: the round is
        retried, as `run` does). One that ends within the round needs no wake-up: the round
        has its result, and waking on it made a round that found nothing new read again at
        once, over and over, while a worker ran the step."""
        task: asyncio.Task[bool] = asyncio.ensure_future(work)
        self._busy[execution_id] = task

        def ended(_: asyncio.Future[bool]) -> None:
            self._busy.pop(execution_id, None)
            if task in self._late:
                self._late.discard(task)
                self._wake.set()

        task.add_done_callback(ended)
        task.add_done_callback(_retrieved)
        return task

    async def _adopted(self, execution_id: str) -> bool:
        await self.adopt(execution_id)
        return True

    async def _advance_or_refuse(self, owned: Owned) -> bool:
        try:
            return await self.advance(owned)
        except RETRYABLE as exc:
            warn_retrying(self.owner, exc)  # our state is kept: the next round tries again
            return False
        except Exception as exc:  # this execution only: the server goes on
            self._drop(owned.execution_id)
            with contextlib.suppress(Exception):
                await self._settle(owned)  # its last round lands before the refusal
            await self._refuse(owned.execution_id, owned.after_seq, exc)
            return True

    async def _renew_due(self) -> None:
        """Renew the ownership leases when a third of the ttl has passed."""
        now = time.monotonic()
        if now >= self._next_renew:
            self._next_renew = now + self.ttl / 3
            if self.owned:
                kept = await self.db.owners.renew(self.owner, list(self.owned), ttl=self.ttl)
                for lost in set(self.owned) - kept:
                    self._drop(lost)

    async def _keep_leases(self, stop: asyncio.Event) -> None:
        """Renewals that go on while a round waits for a slow VM step (under its deadline),
        so another server never takes over an execution this one is still deciding."""
        while not stop.is_set():
            try:
                await self._renew_due()
            except RETRYABLE as exc:
                warn_retrying(self.owner, exc)
            await _first([stop.wait()], self.ttl / 3)

    async def adopt(self, execution_id: str) -> None:
        events = await self.db.events.read(execution_id)
        if not events or events[0]["name"] != REQUESTED:
            await self.db.owners.retire(self.owner, execution_id)
            return
        try:
            program, workload = program_from_requested(events[0])
            # references in results are read from the result table, before the VM sees them
            driver = Driver(program, execution_id, workload, results=self.results)
            rebuilt = await self._within_deadline(execution_id, lambda: driver.replay(events))
        except RETRYABLE:
            raise
        except Exception as exc:  # a program that does not verify, a log it cannot replay
            await self._refuse(execution_id, events[-1]["seq"], exc)
            return
        recorded = sum(1 for e in events if e.get("source") == Source.SERVER)
        timers = Timers(execution_id, self._timer_delivery(execution_id))
        timers.started_at = started_times(events)
        owned = Owned(
            execution_id,
            driver,
            events[-1]["seq"],
            recorded,
            timers,
            self._inline_steps(program),
            set(),
        )
        self.owned[execution_id] = owned
        log.info("%s: execution %s (%s) owned at event %s", self.owner, execution_id,
                 program.name, events[-1]["seq"])  # fmt: skip
        # server events a dead owner decided but never appended, and the outstanding jobs
        # (except the iterations a stored bundle holds: its job runs them); the noop steps
        # they start run here, so under the same deadline as any other VM step
        outstanding = rebuilt.commands
        request = _pending_cancel(events)
        if request is not None:
            outstanding = []  # cancelled below: nothing is enqueued again
        # no server event logged: no job either (a round commits its jobs with its events)
        held = await covering_jobs(self.db.queue, execution_id, outstanding) if recorded else {}
        if held:
            outstanding = [c for c in outstanding if c.action_id not in held]
            owned.bundles.hold(held)
        try:
            out, commands, jobs = await self._within_deadline(
                execution_id,
                lambda: self._run_inline(owned, rebuilt.events[recorded:], outstanding),
            )
        except RETRYABLE:
            raise
        except Exception as exc:  # this execution only: the server goes on
            self._drop(execution_id)
            await self._refuse(execution_id, owned.after_seq, exc)
            return
        await self._commit(owned, out, commands, jobs)
        if request is not None and not owned.vm.finished():
            await self._cancel(owned, request, [])
            return
        await self._close_if_finished(owned)

    async def advance(self, owned: Owned) -> bool:
        """Feed the new input events to the VM, commit what it decided. True when the log may
        hold events we have not read (else a worker's NOTIFY wakes us for the next ones).

        Rounds overlap: a round's commit is left in flight, and the next round reads the new
        inputs and feeds them to the VM meanwhile — the server's Python and PostgreSQL's work
        on its statements run side by side instead of one after the other — then waits for
        it before committing its own (rounds commit in order: a job is never visible before
        the events of an earlier round). The VM runs ahead of the log by one round at most,
        as it did between feeding and committing; a crash loses that round either way and
        the next owner decides it again from the log."""
        last_seq, events = await self.db.events.read_inputs(
            owned.execution_id, owned.after_seq, INPUT_SOURCES, SERVER_READS
        )
        if last_seq <= owned.after_seq:
            # nothing new: a commit still in flight wakes the server when it lands
            # (`_start_commit`), new events when they come; once it landed, whether others
            # appended meanwhile
            if owned.committing is None or not owned.committing.done():
                return False
            return not await self._settle(owned)
        owned.after_seq = last_seq
        inputs, request = _inputs(owned, events)
        if request is not None:
            await self._cancel(owned, request, inputs)
            return False

        def feed() -> tuple[list[Event], list[Command], list[JobSpec]]:
            commands: list[Command] = []
            out: list[Event] = []
            for event in inputs:
                step = owned.driver.feed(event)
                commands.extend(step.commands)
                out.extend(step.events)
            return self._run_inline(owned, out, commands)

        out, commands, jobs = await self._within_deadline(owned.execution_id, feed)
        await self._settle(owned)  # the previous round's commit first
        owned.committing = self._start_commit(owned, out, commands, jobs)
        if owned.vm.finished():
            await self._settle(owned)
            await self._close_if_finished(owned)
        # no read until woken: by the workers' next results (read and fed while the commit is
        # in flight) or by the commit's landing (`_start_commit`), which tells whether
        # others appended meanwhile
        return False

    async def _cancel(self, owned: Owned, request: Event, inputs: list[Event]) -> None:
        """Answer a cancel request with the log's one terminal event, so that nothing can
        follow it: the execution's jobs are cancelled first (from then on no worker result or
        fenced append is accepted) and its timers closed; the inputs that came before are
        fed and the server events they cause appended (no job is enqueued any more); then
        `execution.cancelled` is appended only if the log still ends where this server last
        read it (`append_if`), else what came meanwhile (a signal, a result committed just
        before the jobs were cancelled) is read and fed first."""
        execution_id = owned.execution_id
        owned.timers.close()
        await self.db.queue.cancel_execution(execution_id)
        owned.ended = True
        await self._settle(owned)  # the last round's commit lands first
        cancel = envelope(
            EventName.EXECUTION_CANCELLED,
            Source.CLIENT,
            event_id=f"{request.event_id}:cancelled",
            ts=time.time(),
            payload={**(request.payload or {}), "request_event_id": request.event_id},
        )
        last_seq: int | None = None
        while not owned.vm.finished():
            if inputs:
                out = await self._within_deadline(execution_id, partial(_feed, owned, inputs))
                if out:
                    owned.server_events += sum(1 for e in out if e.source == Source.SERVER)
                    await self.db.events.append(execution_id, out)
            elif last_seq is not None:
                cancel = cancel._replace(ts=time.time())
                if await self.db.events.append_if(execution_id, [cancel], last_seq) is not None:
                    owned.driver.feed(cancel)
                    owned.after_seq = last_seq + 1
                    break
            last_seq, events = await self.db.events.read_inputs(
                execution_id, owned.after_seq, INPUT_SOURCES, SERVER_READS
            )
            owned.after_seq = max(owned.after_seq, last_seq)
            inputs, _ = _inputs(owned, events)
        await self._close_if_finished(owned)

    def _inline_steps(self, program: Any) -> dict[str, bool]:
        """The steps whose pipeline runs inside the server's round: noop-only ones (no I/O, no
        effect), unless the playbook declares keychain entries (a worker resolves those; the
        server has none to give a template)."""
        if not self.inline or program.payload.get("keychain"):
            return {}
        return {step: True for step, inline in noop_only(program).items() if inline}

    def _run_inline(
        self, owned: Owned, events: list[Event], commands: list[Command]
    ) -> tuple[list[Event], list[Command], list[JobSpec]]:
        """Run the noop-only actions among `commands` right here, as embedded mode does, and
        feed their results back to the VM until it asks for nothing that runs inline (at most
        INLINE_ACTIONS per round, the rest go to the queue): a chain or a sequential loop of
        noop steps costs no queue round trip and no commit per step — the round's single
        commit holds every event, in the order they were decided. A noop has no effect, so
        nothing starts before the events that caused it are durable; a crash before the
        commit loses the whole round and the next owner decides and runs it again under the
        same event ids (the action id and attempt 1, as a worker's first attempt). Returns
        the events, the commands left (jobs, timers, cancels) and their jobs, each job's
        payload a snapshot of the VM when the command was issued."""
        if not owned.inline or not any(
            c.kind == CommandKind.RUN and owned.inline.get(c.step) for c in commands
        ):
            vm = owned.vm
            return events, commands, self._jobs(owned, commands, vm.ctx, vm.results)
        started = time.time()  # the events decided so far precede the inline ones
        events = [e if e.ts else e._replace(ts=started) for e in events]
        driver = owned.driver
        refs = driver.refs
        resolve = None if refs is None else refs.resolve
        kept: list[Command] = []
        kept_jobs: list[JobSpec] = []
        budget = INLINE_ACTIONS
        # each batch of commands with the VM's ctx and results when it was issued
        pending = [(commands, *_snapshot(owned.vm, commands))]
        while pending:
            batches, pending = pending, []
            for batch, ctx, results in batches:
                run_now, queued = [], []
                for command in batch:
                    if (
                        command.kind == CommandKind.RUN
                        and owned.inline.get(command.step)
                        and budget
                    ):
                        budget -= 1
                        run_now.append(command)
                    else:
                        queued.append(command)
                kept.extend(queued)
                kept_jobs.extend(self._jobs(owned, queued, ctx, results))
                for command in run_now:
                    emitted: list[Event] = []
                    vm = owned.vm
                    execute(
                        driver.program,
                        command.step,
                        command.step_run_id,
                        command.action_id,
                        command.args,
                        command.iteration,
                        command.item,
                        vm.scope,  # runs before the VM changes: no copy needed
                        emitted.append,
                        resolve=resolve,
                    )
                    now = time.time()
                    for index, event in enumerate(emitted):
                        event = event._replace(event_id=f"{command.action_id}:1:{index}", ts=now)
                        if refs is not None and refs.limit is not None and event.name in SHRUNK:
                            refs.shrink_event(event)  # stored before its reference is logged
                        events.append(event)
                        if is_input(event):
                            step = driver.feed(event)
                            stamp = time.time()
                            events.extend(e._replace(ts=stamp) for e in step.events)
                            if step.commands:
                                pending.append((step.commands, *_snapshot(vm, step.commands)))
        return events, kept, kept_jobs

    async def _commit(
        self, owned: Owned, events: list[Event], commands: list[Command], jobs: list[JobSpec]
    ) -> bool:
        """`_start_commit` and wait for it."""
        return await self._start_commit(owned, events, commands, jobs)

    async def _settle(self, owned: Owned) -> bool:
        """Wait for the commit in flight, if any; True when nobody else appended between our
        last read and it (its error, if it failed, is raised here)."""
        committing, owned.committing = owned.committing, None
        return True if committing is None else await committing

    def _start_commit(
        self, owned: Owned, events: list[Event], commands: list[Command], jobs: list[JobSpec]
    ) -> asyncio.Future[bool]:
        """Append the VM's new events (and those of the actions run inline) and enqueue the
        jobs its commands ask for: one transaction, one round trip (the jobs become visible
        with the events); then arm and cancel timers. Started now, awaited by `_settle`:
        True when nobody else appended since our last read before it."""
        now = time.time()
        if events:
            # stamped when decided; the VM's events of this batch now
            events = [e if e.ts else e._replace(ts=now) for e in events]
            owned.server_events += sum(1 for e in events if e.source == Source.SERVER)
            owned.timers.noted(events, now)
            # a read made while the commit is in flight may return these: not fed again
            owned.appended_inline.update(
                e.event_id for e in events if e.source != Source.SERVER and e.event_id
            )
        owned.bundles.add(jobs)  # before any later round can cancel their actions
        # the round that ends the execution cancels its jobs before its terminal event is
        # appended: no worker result is accepted after it, so none lands after it
        ends = owned.vm.finished() and not owned.ended
        owned.ended |= ends
        task = asyncio.ensure_future(
            self._store(owned, owned.after_seq, events, commands, jobs, ends)
        )
        task.add_done_callback(_retrieved)  # a dropped execution's commit may fail unawaited
        task.add_done_callback(lambda _: self._wake.set())  # the waiting round reads again
        return task

    async def _store(
        self,
        owned: Owned,
        after: int,
        events: list[Event],
        commands: list[Command],
        jobs: list[JobSpec],
        ends: bool = False,
    ) -> bool:
        caught_up = True
        if ends:
            await self.db.queue.cancel_execution(owned.execution_id)
        if events or jobs:
            stored = await self.db.events.append_and_enqueue(owned.execution_id, events, jobs)
            caught_up = bool(stored) and stored[0][1] == after + 1
            if caught_up:
                # nobody appended between our read and these: no need to read them back (a
                # read made meanwhile may have passed them already)
                owned.after_seq = max(owned.after_seq, stored[-1][1])
                owned.appended_inline.clear()
        for command in commands:
            owned.timers.apply(command)  # arms timers, disarms cancelled ones
        # after the events that decided it are committed: the jobs of cancelled
        # actions (a fail_fast loop's other iterations) never start, running ones stop
        cancelled = [c.action_id for c in commands if c.kind == CommandKind.CANCEL]
        if cancelled:
            await self.db.queue.cancel_jobs(owned.bundles.jobs(cancelled))
        return caught_up

    def _jobs(
        self,
        owned: Owned,
        commands: list[Command],
        ctx: dict[str, Any],
        results: dict[str, Any],
    ) -> list[JobSpec]:
        """The jobs of the RUN commands, with this ctx and these results (bundles.py)."""
        return build_jobs(
            commands,
            owned.execution_id,
            self.pool,
            ctx,
            results,
            per_job=self.per_job,
            spread=self.spread,
        )

    def _timer_delivery(self, execution_id: str) -> Any:
        """A due `timer.fired` is appended to the log (and wakes us: we read it as input)."""

        async def append_and_wake(event: Event) -> None:
            # never after the log's terminal event (a timer due as the execution ends)
            await self.db.events.append_if(execution_id, [event])
            self._wake.set()

        def deliver(event: Event) -> None:
            task = asyncio.ensure_future(append_and_wake(event))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

        return deliver

    async def _close_if_finished(self, owned: Owned) -> None:
        vm = owned.vm
        if not vm.finished():
            return
        # whatever ended it, nothing of it may still run (embedded mode stops its threads)
        if not owned.ended:
            await self.db.queue.cancel_execution(owned.execution_id)
        record = await self.db.events.execution(owned.execution_id)
        events = int(record["last_seq"]) if record else owned.after_seq
        summary_ = owned.driver.summary(events)  # values, not references, as in embedded mode
        await self.db.events.finish_execution(owned.execution_id, vm.status, summary_)
        await self.db.owners.retire(self.owner, owned.execution_id)
        self.finished += 1
        log.info("%s: execution %s %s (%s events)", self.owner, owned.execution_id, vm.status,
                 events)  # fmt: skip
        self._drop(owned.execution_id)

    async def _within_deadline(self, execution_id: str, work: Callable[[], T]) -> T:
        """Run a VM step (feeding a batch, or a replay) in a thread under `step_deadline`:
        the event loop goes on meanwhile (leases renewed, other executions advanced); past
        the deadline the execution is failed with NOE859 (the thread's late answer is
        dropped). Expression limits bound every evaluation, so the thread ends."""
        if self.step_deadline is None:
            return work()
        try:
            return await asyncio.wait_for(asyncio.to_thread(work), self.step_deadline)
        except TimeoutError:
            raise StepDeadline(
                "NOE859",
                f"a step of execution {execution_id}'s control VM ran past its deadline of "
                f"{self.step_deadline:g} s",
                "see the guards and templates of the steps it was deciding (`noetl-vm events`)",
            ) from None

    async def _refuse(self, execution_id: str, last_seq: int, exc: Exception) -> None:
        """Fail an execution this server cannot run (its program does not verify, its log
        cannot be replayed, its VM raised): recorded once, with the reason's code, and
        retired, so no other server claims it again and every other execution goes on."""
        code = exc.code if isinstance(exc, UserError) else "NOE850"
        message = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        error = {"code": code, "message": message, "step": None}
        failed = envelope(
            EventName.EXECUTION_FAILED,
            Source.SERVER,
            event_id=f"{execution_id}:refused",
            ts=time.time(),
            payload={"error": error},
        )
        await self.db.queue.cancel_execution(execution_id)
        await self.db.events.append_if(execution_id, [failed])  # not past another end
        summary = {
            "execution_id": execution_id,
            "status": "failed",
            "steps": {},
            "ctx": {},
            "result": None,
            "events": last_seq + 1,
            "error": error,
        }
        await self.db.events.finish_execution(execution_id, "failed", summary)
        await self.db.owners.retire(self.owner, execution_id)
        self.refused += 1

    def _drop(self, execution_id: str) -> None:
        owned = self.owned.pop(execution_id, None)
        if owned is not None:
            owned.timers.close()

    async def reap(self) -> bool:
        return await reap_expired(self.db)


# how long a round waits for the executions' tasks before it goes on without the slow ones
ROUND_SLICE = 0.05

# inline actions per round at most (one transaction): the rest are enqueued for the workers
INLINE_ACTIONS = 1000

# the action events that carry results (stored by reference when large, as a worker does)
SHRUNK = frozenset({EventName.TASK_DONE, EventName.STEP_DONE, EventName.LOOP_ITERATION_DONE})


# what a server reads of its executions' logs: the VM's inputs and the cancel requests
SERVER_READS = INPUT_NAMES | {EventName.CANCEL_REQUESTED.value}
_CANCEL_REQUESTED = EventName.CANCEL_REQUESTED.value


def _inputs(owned: Owned, records: list[dict[str, Any]]) -> tuple[list[Event], Event | None]:
    """The input events of `records` the VM has not had yet, and the first cancel request
    among them (None: none)."""
    inputs = []
    request = None
    bundles = owned.bundles
    for record in records:
        event = Event.from_record(record)
        if owned.appended_inline and event.event_id in owned.appended_inline:
            owned.appended_inline.discard(event.event_id)  # ours: the VM has it already
            continue
        if bundles:
            bundles.done(event.action_id)
        if is_input(event):
            if event.name == EventName.TIMER_FIRED:
                owned.timers.fired(event)
            inputs.append(event)
        elif request is None and event.name == _CANCEL_REQUESTED:
            request = event
    return inputs, request


def _pending_cancel(records: list[dict[str, Any]]) -> Event | None:
    """A log's cancel request not answered yet (a server died before its answer)."""
    for record in records:
        if record["name"] == _CANCEL_REQUESTED:
            return Event.from_record(record)
    return None


def _feed(owned: Owned, inputs: list[Event]) -> list[Event]:
    """Feed inputs once a cancel is asked for: the events they cause, no command run."""
    out: list[Event] = []
    for event in inputs:
        out.extend(owned.driver.feed(event).events)
    return out


def _snapshot(vm: ControlVM, commands: list[Command]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Copies of the VM's ctx and results for the jobs of `commands` (they change before the
    jobs are enqueued when actions run inline in between); none when nothing is to run."""
    if not any(c.kind == CommandKind.RUN for c in commands):
        return {}, {}
    return dict(vm.ctx), dict(vm.results)


def _retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def _first(waits: list[Any], timeout: float) -> None:
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
