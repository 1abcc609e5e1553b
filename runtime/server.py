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
import time
from functools import partial
from typing import Any

from noetlc.ir.events import EventName
from noetlc.runtime.backend import ANY_KEY, EVENTS, EXECUTIONS, SERVER_READS, Backend
from noetlc.runtime.bundles import PER_JOB, SPREAD, covering_jobs
from noetlc.runtime.cluster import RETRYABLE, new_owner, warn_retrying
from noetlc.runtime.driver import REQUESTED, Driver, program_from_requested
from noetlc.runtime.queue import JobSpec
from noetlc.runtime.reaper import reap_expired
from noetlc.runtime.server_commit import ServerCommits, log
from noetlc.runtime.server_state import (
    ROUND_SLICE,
    STEP_DEADLINE,
    Owned,
    StepDeadline,
    feed_inputs,
    first_of,
    new_inputs,
    pending_cancel,
    retrieved,
)
from noetlc.runtime.timers import Timers, started_times
from noetlc.vm.protocol import INPUT_SOURCES, Command, Event, Source, envelope

__all__ = ["ROUND_SLICE", "STEP_DEADLINE", "Owned", "Server", "StepDeadline"]


class Server(ServerCommits):
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
        # executions dropped after a failed round, to adopt again from the log
        self._rebuild: set[str] = set()
        # the tasks a round stopped waiting for (past its slice): their end wakes the server
        self._late: set[asyncio.Task[bool]] = set()
        # set by our own appends made outside `tick` (timers, a round's commit landing)
        self._wake = asyncio.Event()
        # reference-first results the control VMs read (arcs, step args, the summary)
        self.results = db.result_store()
        # the executions whose events were notified since their last read (`run` collects
        # them; None when a test drives `tick` alone: every round reads)
        self._notified: set[str] | None = None

    async def run(self, stop: asyncio.Event) -> None:
        notes = self.db.notifications
        # our own appends need not wake us (we know what we wrote); timers wake us directly
        notes.ignore_own = True
        self._notified = notes.collect(EVENTS)
        keeper = asyncio.create_task(self._keep_leases(stop))
        try:
            while not stop.is_set():
                await notes.ensure_listening(EVENTS, EXECUTIONS)  # again after a reconnection
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
                        await first_of(
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
            notes.uncollect(EVENTS, self._notified)
            self._notified = None
            keeper.cancel()
            for task in list(self._busy.values()):  # a VM step past the stop: dropped
                task.cancel()
            if self._busy:
                await asyncio.wait(list(self._busy.values()), timeout=5.0)
            for owned in self.owned.values():
                owned.timers.close()
                with contextlib.suppress(Exception):
                    await self._settle(owned)  # the last round's commit lands first
            if self.owned or self._rebuild:
                await self.db.owners.release(self.owner, [*self.owned, *self._rebuild])
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
        if self._rebuild:
            await self._rebuild_dropped(started)
        for execution_id in list(self.owned):
            owned = self.owned.get(execution_id)
            if owned is None or execution_id in self._busy:  # lost meanwhile, or busy
                continue
            started.append(self._run_for(execution_id, self._advance_or_refuse(owned)))
        if self._notified:
            # the notified executions this server does not own are not its to read
            self._notified.intersection_update([*self.owned, *self._busy])
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
        task.add_done_callback(retrieved)
        return task

    async def _adopted(self, execution_id: str) -> bool:
        await self.adopt(execution_id)
        return True

    async def _advance_or_refuse(self, owned: Owned) -> bool:
        try:
            return await self.advance(owned)
        except RETRYABLE as exc:
            warn_retrying(self.owner, exc)
            # a commit that failed lost the round its VM decided (its events and jobs): the
            # VM is ahead of the log and nothing would ever wake it. Rebuilt from the log, as
            # a new owner would (`adopt`), once the database answers and the lease is ours
            self._drop(owned.execution_id)
            with contextlib.suppress(Exception):
                await self._settle(owned)  # a commit still in flight lands first
            self._rebuild.add(owned.execution_id)
            self._wake.set()  # the next round rebuilds it
            return False
        except Exception as exc:  # this execution only: the server goes on
            self._drop(owned.execution_id)
            with contextlib.suppress(Exception):
                await self._settle(owned)  # its last round lands before the refusal
            await self._refuse(owned.execution_id, owned.after_seq, exc)
            return True

    async def _rebuild_dropped(self, started: list[asyncio.Task[bool]]) -> None:
        """Adopt again the executions a failed round dropped (`_advance_or_refuse`) whose
        lease is still ours; the others are claimed by whoever finds them expired."""
        ids = [e for e in self._rebuild if e not in self.owned and e not in self._busy]
        if not ids:
            return
        kept = await self.db.owners.renew(self.owner, ids, ttl=self.ttl)
        self._rebuild.difference_update(ids)
        for execution_id in ids:
            if execution_id in kept:
                started.append(self._run_for(execution_id, self._adopted(execution_id)))

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
            await first_of([stop.wait()], self.ttl / 3)

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
        request = pending_cancel(events)
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
        if not self._needs_read(owned):
            # woken by our own commit landing (or another execution's events): nothing to
            # read unless someone appended between our last read and that commit
            committing = owned.committing
            if committing is None or not committing.done() or await self._settle(owned):
                return False
        owned.read_at = time.monotonic()
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
        inputs, request = new_inputs(owned, events)
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

    def _needs_read(self, owned: Owned) -> bool:
        """Whether a round reads the execution's log: when its events were notified since
        the last read (a worker's, a client's; the notification is taken here, so one that
        comes during the read asks for the next), and at least every `poll` seconds (the
        fallback when notifications are lost). Not for our own commit landing: it tells
        whether anyone appended between our last read and it (`_settle`)."""
        notified = self._notified
        if notified is None or owned.execution_id in notified:
            if notified is not None:
                notified.discard(owned.execution_id)
            return True
        return time.monotonic() - owned.read_at >= self.poll

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
                out = await self._within_deadline(execution_id, partial(feed_inputs, owned, inputs))
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
            inputs, _ = new_inputs(owned, events)
        await self._close_if_finished(owned)

    async def reap(self) -> bool:
        return await reap_expired(self.db)
