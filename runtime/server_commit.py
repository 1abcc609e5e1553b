"""A server's commits: the actions it runs inside a round (noop-only steps), the one
transaction that appends a round's events and enqueues its jobs, timers, closing an ended
execution, and refusing one it cannot run (runtime/server.py drives the rounds)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from noetlc.diagnostics.errors import UserError
from noetlc.ir.events import EventName
from noetlc.runtime.backend import Backend
from noetlc.runtime.bundles import build_jobs
from noetlc.runtime.driver import failed_summary
from noetlc.runtime.execute import execute, noop_only
from noetlc.runtime.queue import JobSpec
from noetlc.runtime.server_state import (
    INLINE_ACTIONS,
    SHRUNK,
    Owned,
    StepDeadline,
    retrieved,
    snapshot,
)
from noetlc.vm.protocol import Command, CommandKind, Event, Source, envelope, is_input

# one line per execution owned and ended (`noetl-vm server --log-level`)
log = logging.getLogger("noetlc.server")

T = TypeVar("T")


class ServerCommits:
    """The commit side of `Server` (its attributes are set by `Server.__init__`)."""

    db: Backend
    owner: str
    pool: str
    per_job: int
    spread: int
    inline: bool
    step_deadline: float | None
    owned: dict[str, Owned]
    finished: int
    refused: int
    _background: set[asyncio.Future[Any]]
    _wake: asyncio.Event
    _notified: set[str] | None

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
        pending = [(commands, *snapshot(owned.vm, commands))]
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
                        command,
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
                                pending.append((step.commands, *snapshot(vm, step.commands)))
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
        task.add_done_callback(retrieved)  # a dropped execution's commit may fail unawaited
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
            if self._notified is not None:
                self._notified.add(execution_id)  # our own append notifies nobody here
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
        summary = failed_summary(execution_id, error, last_seq + 1)
        await self.db.events.finish_execution(execution_id, "failed", summary)
        await self.db.owners.retire(self.owner, execution_id)
        self.refused += 1

    def _drop(self, execution_id: str) -> None:
        owned = self.owned.pop(execution_id, None)
        if owned is not None:
            owned.timers.close()
