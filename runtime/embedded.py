"""The embedded runtime: one process runs the control VM, the pipeline VM and the tools.

One loop thread owns the control VM and the event store; it waits on a queue (no asyncio:
runtime/threads.py says why). The VM's commands run as actions: a pipeline made only of `noop` tasks runs inline, anything else in
a thread pool (tools block; parallel loop iterations really overlap). Workers hand their
events to the loop as they happen; the loop feeds the input events to the VM and logs them with
the VM's own events. Logging is group commit (runtime/group_commit.py): events of inline noop
work wait in an open group, which is committed in one transaction before anything externally
visible happens — a command handed to the thread pool, a cancel sent to a thread, a timer, the
loop waiting for events, the summary — or when it reaches its size or age bound; a batch with
events from threads, timers or other processes is committed at once. So every event is durable
before its effects (the argument is in docs/runtime.md). Timers are due times the loop checks;
`cancel` and `signal` requests from other processes are read from the store (`noetl-vm
cancel|signal` write them) every `poll_interval` seconds.

`resume` rebuilds the VM from the log (runtime/replay.py) and runs the commands that were
issued and not answered, with the recorded task outcomes (`task.done`) as the pipeline VM's memo: a
task that finished before the crash is not called again.
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from noetlc.ir.program import Program
from noetlc.runtime.driver import (
    Driver,
    cancelled,
    client_request,
    requested,
    resumed,
    stored_program,
)
from noetlc.runtime.event_store import EventStore
from noetlc.runtime.execute import ToolEnv, execute, memo_from_events, noop_only, worker_event
from noetlc.runtime.family import Family, descendants, lineage, started_children
from noetlc.runtime.group_commit import GroupCommit
from noetlc.runtime.ids import snowflake
from noetlc.runtime.logs import ExecutionLogs, Row
from noetlc.runtime.ownership import OwnershipLost
from noetlc.runtime.results import (
    References,
    StorageOverBudget,
    over_budget_event,
    payload_limit,
)
from noetlc.runtime.stored_program import encode_program
from noetlc.runtime.threads import Clock, ThreadPool, collector_paused, heap_frozen
from noetlc.runtime.timers import Timers, started_times
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.vm.budgets import budgets_of
from noetlc.vm.control import ControlVM
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.pipeline import ToolCall
from noetlc.vm.protocol import (
    RESULT_NAMES,
    Command,
    CommandKind,
    Event,
    EventName,
    Source,
    is_input,
)

if TYPE_CHECKING:
    from noetlc.runtime.children import EmbeddedChildren

_LOOP_ITERATION_FAILED = EventName.LOOP_ITERATION_FAILED.value
_STEP_FAILED = EventName.STEP_FAILED.value

OnEvents = Callable[[list[Event]], None]
_INLINE = threading.Event()  # the cancel flag of inline actions: they finish before any cancel


def run_embedded(
    payload: dict[str, Any] | Program,
    overrides: dict[str, Any] | None = None,
    store: EventStore | None = None,
    *,
    execution_id: str | None = None,
    on_events: OnEvents | None = None,
    call_tool: ToolCall | None = None,
    parent_id: str | None = None,
    keychain_file: str | None = None,
    stop: threading.Event | None = None,
    provider: Callable[[str], Any] | None = None,
    family: Family | None = None,
    depth: int = 0,
) -> dict[str, Any]:
    """Run a compiled playbook to completion and return its summary. A bad keychain file
    raises `KeychainError` (NOE813) before anything runs. `stop` (a child's calling action's
    cancel flag) cancels the execution when set. `payload` is a verified program object (the
    compiler's, or a decoded `.nbc`: used as is) or a payload map (verified first). `provider`
    gives keychain entries by name (the service's credential store), after the environment and
    before the keychain file."""
    from noetlc.runtime.event_store import MemoryStore

    with collector_paused():
        program = LoadedProgram(payload)
    runtime = EmbeddedRuntime(
        program,
        store if store is not None else MemoryStore(),
        execution_id or snowflake(),
        on_events=on_events,
        call_tool=call_tool,
        keychain_file=keychain_file,
        stop=stop,
        provider=provider,
        family=family,
        depth=depth,
    )
    return runtime.start({**(program.workload or {}), **(overrides or {})}, parent_id)


def resume_embedded(
    store: EventStore,
    execution_id: str,
    *,
    on_events: OnEvents | None = None,
    call_tool: ToolCall | None = None,
    keychain_file: str | None = None,
    stop: threading.Event | None = None,
    provider: Callable[[str], Any] | None = None,
    family: Family | None = None,
    depth: int = 0,
) -> dict[str, Any]:
    """Finish an execution whose process died; the caller checked that it is not finished."""
    try:
        with collector_paused():
            program, workload = stored_program(store.execution(execution_id))
    except LookupError:
        raise LookupError(execution_id) from None
    runtime = EmbeddedRuntime(
        program,
        store,
        execution_id,
        on_events=on_events,
        call_tool=call_tool,
        keychain_file=keychain_file,
        stop=stop,
        provider=provider,
        family=family,
        depth=depth,
    )
    return runtime.resume(workload)


class EmbeddedRuntime:
    poll_interval = 0.2

    def __init__(
        self,
        program: LoadedProgram,
        store: EventStore,
        execution_id: str,
        *,
        on_events: OnEvents | None = None,
        call_tool: ToolCall | None = None,
        max_threads: int = 8,
        keychain_file: str | None = None,
        stop: threading.Event | None = None,
        provider: Callable[[str], Any] | None = None,
        family: Family | None = None,
        depth: int = 0,
    ) -> None:
        self.program = program
        self.family = family  # the budgets across the root's children (None: found at start)
        self.depth = depth  # levels below the root
        self.store = store
        self.execution_id = execution_id
        self.on_events = on_events
        self.call_tool = call_tool  # None: the standard tools through the registry
        self.max_threads = max_threads
        self.keychain_file = keychain_file
        self.keychain = Keychain(
            program.payload.get("keychain") or [], file=keychain_file, provider=provider
        )
        self.logs = ExecutionLogs(self._store_logs, self.keychain.redact)
        self.env = ToolEnv(
            self.keychain,
            playbook_folder(program),
            self._run_child,
            logs=self.logs,
            worker="embedded",
        )
        self.refs = References(store, payload_limit(program.payload), budgets_of(program.payload))
        self.inline = noop_only(program)
        self.driver: Driver | None = None
        self.vm: ControlVM | None = None
        self.active: dict[str, threading.Event] = {}  # action_id -> cancel flag
        self.memo: dict[str, dict[int, dict[str, Any]]] = {}
        self.last_request = 0
        self.total_events = 0
        self.group = GroupCommit(store, execution_id, on_events)
        self.stop = stop  # a child's: its calling action was cancelled, or its parent ended
        self.stop_asked = False  # a cancel was queued (one is enough)
        self.parent_id: str | None = None
        self.children: EmbeddedChildren | None = None  # `kind: playbook` (`_run_child`)

    # ------------------------------------------------------------------ entry points

    def start(self, workload: dict[str, Any], parent_id: str | None = None) -> dict[str, Any]:
        self.parent_id = parent_id
        if self.family is None and parent_id is None:
            self.family = Family(self.execution_id, self.program.payload)  # a new root
        self.store.create_execution(
            self.execution_id,
            self.program.name,
            program=encode_program(self.program.image),
            workload=workload,
            parent_id=parent_id,
        )
        driver = self._driver(workload)
        first = driver.start()
        self._log(
            [requested(self.execution_id, self.program.name, workload, parent_id), *first.events]
        )
        return self._loop(first.commands)

    def find_family(self) -> None:
        """A runtime started without its tree's counts (a resumed root, a child started by
        another process): its depth and the children its root has, from the store."""
        if self.family is not None:
            return
        root, self.depth = lineage(self.store, self.execution_id)
        self.family = Family(root, self.program.payload, descendants(self.store, root))

    def _driver(self, workload: dict[str, Any]) -> Driver:
        with collector_paused():  # the VM's tables: a step's worth of objects per step
            driver = self.driver = Driver(
                self.program,
                self.execution_id,
                workload,
                results=self.store,
                keychain=self.keychain.namespace(),
                spill=True,
            )
        self.vm = driver.vm
        return driver

    def resume(self, workload: dict[str, Any]) -> dict[str, Any]:
        record = self.store.execution(self.execution_id) or {}
        self.parent_id = record.get("parent_id")
        self.find_family()
        events = self.store.read(self.execution_id)
        # the log is a prefix cut at a group boundary: every server event the replay
        # regenerates is in it already
        driver = self._driver(workload)
        rebuilt = driver.replay(events)
        self.total_events = len(events)
        self.memo = memo_from_events(events)
        self.refs.count_logged(events)
        for event in events:
            request_id = (event.get("payload") or {}).get("request_id")
            if event.get("source") == Source.CLIENT and isinstance(request_id, int):
                self.last_request = max(self.last_request, request_id)
        if not driver.vm.finished():  # else the log ended and only the row lags: no event
            self._log([resumed(str(uuid.uuid4()), len(events))])
        for child_id in started_children(self.store, events):  # started, not waited for
            # found in the store: resumed, not admitted again
            self._children().detach({}, {}, child_id)
        return self._loop(rebuilt.commands, started_at=started_times(events))

    # ------------------------------------------------------------------ the loop

    def _loop(
        self, commands: list[Command], started_at: dict[str, float] | None = None
    ) -> dict[str, Any]:
        vm = self.vm
        assert vm is not None
        # events from pool threads, due timers and requests; a `_Call` runs on this thread
        self.queue: queue.SimpleQueue[Event | _Call] = queue.SimpleQueue()
        self.inbox: list[Event] = []  # events of inline actions: no queue round trip
        self.pool = ThreadPool(self.max_threads, thread_name_prefix="noetl")
        clock = Clock()
        self.timers = Timers(self.execution_id, self.queue.put, clock.call_later)
        self.timers.started_at = started_at or {}
        with heap_frozen():  # what lives through the run: no full collection scans it
            try:
                self._dispatch(commands)
                next_poll = 0.0
                while not (vm.finished() and not self.active):
                    if vm.finished():
                        for flag in self.active.values():
                            if flag is not _INLINE:
                                flag.set()  # the execution ended: stop what still runs
                    now = time.monotonic()
                    if now >= next_poll:
                        self._poll_requests()
                        next_poll = now + self.poll_interval
                    clock.run_due()  # puts `timer.fired` on the queue
                    external = True  # the batch holds events from threads, timers or requests
                    batch: list[Event] = []
                    queued: list[Event | _Call] = []
                    if self.inbox:
                        batch, self.inbox = self.inbox, []
                        external = not self.queue.empty()
                    elif self.queue.empty():
                        self.group.flush()  # nothing is left to do but wait: the group is done
                        wait = next_poll - time.monotonic()
                        due = clock.next_due()
                        if due is not None:
                            wait = min(wait, due)
                        try:
                            queued.append(self.queue.get(timeout=max(0.0, wait)))
                        except queue.Empty:
                            continue
                    while not self.queue.empty():
                        queued.append(self.queue.get_nowait())
                    if queued:
                        batch.extend(_calls_run(queued))
                    self._process(batch, external)
                self.group.flush()  # before the summary is stored and returned
            except OwnershipLost:
                # another process took the execution over: nothing more is written; the
                # actions still running are asked to stop and nothing queued starts
                for flag in self.active.values():
                    if flag is not _INLINE:
                        flag.set()
                self.pool.cancel_pending()
                raise
            finally:
                self.timers.close()
                self.pool.shutdown()
        assert self.driver is not None
        summary_ = self.driver.summary(self.total_events)
        if self.keychain.has_secrets:
            summary_ = self.keychain.redact(summary_)  # it is printed and stored
        self.store.finish_execution(self.execution_id, vm.status, summary_)
        if self.children is not None:  # children started and not waited for end first
            self.children.join()
        return summary_

    def _process(self, batch: list[Event], external: bool) -> None:
        driver = self.driver
        assert driver is not None
        out: list[Event] = []
        commands: list[Command] = []
        shrink = self.refs.active
        secrets = self.keychain.has_secrets
        vm = driver.vm
        for event in batch:
            if vm.status != "running":
                # the execution ended (its terminal event is logged): a late result of an
                # action that was still running, a second cancel, a signal are not recorded:
                # nothing follows the terminal event (their effects, if any, are at-least-once)
                if event.source == _WORKER and event.name in RESULT_NAMES:
                    self.active.pop(event.action_id or "", None)
                continue
            worker = event.source == _WORKER
            if worker and secrets:
                # the VM sees what the log keeps (`***` for a secret), as after a resume and
                # in distributed mode; a result stored by reference is stored redacted
                event = event._replace(payload=self.keychain.redact(event.payload))
            if shrink and worker:
                try:
                    self.refs.shrink_event(event)  # before the VM and the log see it
                except StorageOverBudget as over:
                    event = over_budget_event(event, over.error)
            out.append(event)
            if worker and event.name in RESULT_NAMES:
                self.active.pop(event.action_id or "", None)
            if is_input(event):
                if event.name == _TIMER_FIRED:
                    self.timers.fired(event)
                step = driver.feed(event)
                commands.extend(step.commands)
                out.extend(step.events)
        self._log(out)
        if external:
            # a thread's tool ran, a timer fired, another process asked: log it now, as
            # every batch was logged before group commit (it may be the only record of an effect)
            self.group.flush()
        self._dispatch(commands)

    def _log(self, events: list[Event]) -> None:
        """Add events to the open group; `self.group.flush()` makes them durable (the store
        stamps `ts` on events that have none)."""
        if not events:
            return
        if self.keychain.has_secrets:
            redact = self.keychain.redact
            events = [e._replace(payload=redact(e.payload)) for e in events]
        self.total_events += len(events)
        self.group.add(events)

    # ------------------------------------------------------------------ commands

    def _dispatch(self, commands: list[Command]) -> None:
        for command in commands:
            if not self._internal(command):
                self.group.flush()  # everything that caused it is durable before it starts
            kind = command.kind
            if kind == _RUN:
                self._run(command)
            else:
                if kind == CommandKind.CANCEL:
                    flag = self.active.get(command.action_id)
                    if flag is not None and flag is not _INLINE:
                        flag.set()
                self.timers.apply(command)  # arms a timer, or disarms a cancelled one

    def _internal(self, command: Command) -> bool:
        """Does the command stay inside this loop (an inline noop run, or the cancel of one)?
        Only those may start while the events that caused them wait in the open group."""
        if command.kind == _RUN:
            return self.inline[command.step] and command.action_id not in self.memo
        if command.kind == CommandKind.CANCEL:
            flag = self.active.get(command.action_id)
            return (flag is None or flag is _INLINE) and (
                command.step_run_id not in self.timers.handles
            )
        return False

    def _run(self, command: Command) -> None:
        vm = self.vm
        assert vm is not None
        action_id = command.action_id  # read once: each read of this lazy field is a call
        memo = self.memo.pop(action_id, None)
        action = partial(
            execute,
            self.program,
            command,
            call_tool=self.call_tool,
            env=self.env,
            resolve=self.refs.resolve,
        )
        if self.inline[command.step] and memo is None:
            # runs now, on this thread, before the VM changes: it borrows the VM's scope (a
            # copy per step would grow with every finished step)
            self.active[action_id] = _INLINE
            action(vm.scope, self.inbox.append, borrow_scope=True)
            return
        scope = dict(vm.scope)  # the VM goes on while the thread runs: a snapshot
        flag = self.active[action_id] = threading.Event()
        emit = self.queue.put  # thread-safe

        def wait(seconds: float) -> bool:
            return flag.wait(seconds) if seconds > 0 else flag.is_set()

        action = partial(action, handed_at=time.time())
        self.pool.submit(_guarded, command, action, scope, emit, memo, wait)

    def _store_logs(self, rows: list[Row]) -> None:
        """Task output from a pool thread: stored from the loop (the store's one writer)."""
        self.queue.put(_Call(partial(self.store.append_logs, self.execution_id, rows)))

    # ------------------------------------------------------------------ tools

    def _run_child(
        self, path: str, workload: dict[str, Any], action_id: str, child_id: str, wait: bool = True
    ) -> dict[str, Any]:
        """`kind: playbook` (runtime/children.py, `EmbeddedChildren`; imported when a child
        runs: the distributed runner beside it imports asyncio)."""
        return self._children().start(path, workload, action_id, child_id, wait)

    def _children(self) -> EmbeddedChildren:
        from noetlc.runtime.children import EmbeddedChildren

        if self.children is None:
            self.children = EmbeddedChildren(self, run_embedded, resume_embedded)
        return self.children

    # ------------------------------------------------------------------ requests

    def _poll_requests(self) -> None:
        # the stored requests first: a cancel that carries its requester's reason is the one
        # recorded when the same requester also set the stop flag (the service does both)
        for request in self.store.requests(self.execution_id, self.last_request):
            self.last_request = request["request_id"]
            event = client_request(f"{self.execution_id}:request:{request['request_id']}", request)
            if event is not None:
                self.stop_asked |= event.name == _EXECUTION_CANCELLED
                self.queue.put_nowait(event)
        if self.stop is not None and self.stop.is_set() and not self.stop_asked:
            self.stop_asked = True
            reason = (
                "the calling action of the parent was cancelled, or the parent ended"
                if self.parent_id
                else "the process running the execution stopped it"
            )
            self.queue.put_nowait(cancelled(f"{self.execution_id}:stopped-by-parent", reason))


class _Call:
    """Work a pool thread hands to the loop thread (storing task output): not an event."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn


def _calls_run(batch: list[Event | _Call]) -> list[Event]:
    """Run the batch's calls, in order, on the loop thread; the events that remain."""
    events: list[Event] = []
    for item in batch:
        if isinstance(item, _Call):
            item.fn()
        else:
            events.append(item)
    return events


def playbook_folder(program: LoadedProgram) -> Path:
    """Where relative paths in tool arguments start: the playbook's own folder."""
    positions = program.payload.get("positions") or []
    if positions and positions[0][0]:
        folder = Path(str(positions[0][0])).parent
        if folder.is_dir():
            return folder
    return Path.cwd()


def _guarded(
    command: Command,
    action: Callable[..., Any],
    scope: dict[str, Any],
    emit: Callable[[Event], None],
    memo: dict[int, dict[str, Any]] | None,
    wait: Callable[[float], bool],
) -> None:
    """A worker thread must always answer: a crash in the runner becomes a failed result."""
    try:
        action(scope, emit, memo=memo, wait=wait)
    except BaseException as exc:
        name = _STEP_FAILED if command.iteration is None else _LOOP_ITERATION_FAILED
        error = {"type": type(exc).__name__, "message": str(exc)}
        emit(
            worker_event(
                name,
                command.step,
                command.step_run_id,
                command.action_id,
                command.iteration,
                {"error": error},
            )
        )


_WORKER = Source.WORKER.value
_EXECUTION_CANCELLED = EventName.EXECUTION_CANCELLED.value
_TIMER_FIRED = EventName.TIMER_FIRED.value
_RUN = CommandKind.RUN.value

__all__ = ["EmbeddedRuntime", "playbook_folder", "resume_embedded", "run_embedded"]
