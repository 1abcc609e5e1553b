"""The runtime protocol: what flows between the control VM, the runtimes and the stores.

* `EventName` — every event name an execution's log can hold (defined at the bottom of the
  layers, in `ir/events.py`, so the compiler reads the same names; re-exported here). The hot
  paths keep module aliases of the members' `.value` (the plain string): no enum attribute
  lookup per event, and SQLite binds a plain `str` without adapting it.
* `Event` — one immutable event envelope (a `NamedTuple`: no per-instance dict, creation as
  cheap as a dict literal). `envelope(...)` builds one from keyword fields; `recorded(...)` (the
  control VM's server events) and `action_event(...)` (an action's events) are its positional
  forms for the hot paths. Stores serialize an `Event` to their rows at their edge and hand
  records back as dicts; `Event.from_record` turns a stored record into an `Event` again.
* `Command` — what the control VM asks the runtime to do: run a step (or one loop iteration),
  cancel one, or set a timer (a frozen dataclass).
* `VMAnswer` — the control VM's answer to `start()` or to one input event: the commands it issues
  and the server events it recorded, in order (a frozen dataclass).

Both are plain values read from outside. The VM builds them on its hot path as drafts
(`CommandDraft`, `AnswerDraft`: the same slots, assignable) and leaves a command's action id
and an answer's events None, computed when first read: most commands' ids and most answers'
events are never read in a replay or an in-memory run.

Input events (what the control VM consumes): a worker's result (`RESULT_NAMES`, source
`worker`), `signal.received` and `execution.cancelled` (source `client`), `timer.fired`
(source `timer`); `is_input` tells. Everything else in a log is the VM's output or a worker's
task events.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from hashlib import sha256
from typing import Any, NamedTuple

from noetlc.ir.events import TERMINAL_STATUS, EventName


class Source(StrEnum):
    """Who recorded an event."""

    SERVER = "server"  # the control VM
    WORKER = "worker"  # the pipeline VM and the tools (an action)
    CLIENT = "client"  # a submission, a cancel or a signal request, a resume
    TIMER = "timer"  # a listener's timer


# the worker results the control VM consumes (sets of the plain strings: a member finds
# itself in them as well, since it equals and hashes as its string)
RESULT_NAMES = frozenset(
    n.value
    for n in (
        EventName.STEP_DONE,
        EventName.STEP_FAILED,
        EventName.LOOP_ITERATION_DONE,
        EventName.LOOP_ITERATION_FAILED,
    )
)
INPUT_NAMES = RESULT_NAMES | {
    n.value
    for n in (EventName.SIGNAL_RECEIVED, EventName.TIMER_FIRED, EventName.EXECUTION_CANCELLED)
}
INPUT_SOURCES = frozenset(s.value for s in (Source.WORKER, Source.CLIENT, Source.TIMER))
# the events that end an execution's log: exactly one, and nothing is appended after it
TERMINAL_NAMES = frozenset(TERMINAL_STATUS)

# the envelope's fields as stores keep them, in column order after (execution_id, seq)
ENVELOPE = (
    "event_id",
    "ts",
    "name",
    "source",
    "step",
    "step_run_id",
    "task_run_id",
    "iteration",
    "attempt",
    "parent_id",
    "action_id",
    "pc",
)


class Event(NamedTuple):
    """One event envelope. `payload` is the event's data (a dict; `envelope` never leaves it
    None). `event_id` makes appends idempotent; `seq` and `ts` are assigned by the store when
    the event is appended (a recorded event has them, a new one need not)."""

    name: str
    source: str
    step: str | None = None
    step_run_id: str | None = None
    iteration: int | None = None
    payload: dict[str, Any] | None = None
    event_id: str | None = None
    execution_id: str | None = None
    seq: int | None = None
    ts: float | None = None
    task_run_id: str | None = None
    attempt: int | None = None
    parent_id: str | None = None
    action_id: str | None = None
    pc: int | None = None

    @property
    def data(self) -> dict[str, Any]:
        """The payload, never None."""
        return self.payload or {}

    @classmethod
    def from_record(cls, record: Any) -> Event:
        """An `Event` from a stored record (a dict with envelope fields), or the event itself."""
        if type(record) is cls:
            return record
        get = record.get
        return _new(
            cls,
            (
                record["name"],
                get("source"),
                get("step"),
                get("step_run_id"),
                get("iteration"),
                get("payload") or {},
                get("event_id"),
                get("execution_id"),
                get("seq"),
                get("ts"),
                get("task_run_id"),
                get("attempt"),
                get("parent_id"),
                get("action_id"),
                get("pc"),
            ),
        )


_new = tuple.__new__
_SERVER = Source.SERVER.value
_WORKER = Source.WORKER.value


def envelope(
    name: str,
    source: str,
    *,
    event_id: str | None = None,
    execution_id: str | None = None,
    step: str | None = None,
    step_run_id: str | None = None,
    iteration: int | None = None,
    payload: dict[str, Any] | None = None,
    seq: int | None = None,
    ts: float | None = None,
    task_run_id: str | None = None,
    attempt: int | None = None,
    parent_id: str | None = None,
    action_id: str | None = None,
    pc: int | None = None,
) -> Event:
    """The envelope constructor: every event the runtimes create is built here, or by one of
    its positional forms for the hot paths: `recorded` (the control VM's server events) and
    `action_event` (an action's events)."""
    return _new(
        Event,
        (
            name,
            source,
            step,
            step_run_id,
            iteration,
            {} if payload is None else payload,
            event_id,
            execution_id,
            seq,
            ts,
            task_run_id,
            attempt,
            parent_id,
            action_id,
            pc,
        ),
    )


def recorded(
    event_id: str,
    execution_id: str,
    name: str,
    step: str | None,
    step_run_id: str | None,
    iteration: int | None,
    payload: dict[str, Any],
) -> Event:
    """A server event of the control VM (positional: the VM records one per transition)."""
    return _new(
        Event,
        (
            name,
            _SERVER,
            step,
            step_run_id,
            iteration,
            payload,
            event_id,
            execution_id,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        ),
    )


def action_event(
    event_id: str | None,
    name: str,
    step: str,
    step_run_id: str,
    iteration: int | None,
    action_id: str,
    payload: dict[str, Any],
    attempt: int | None,
    task_run_id: str | None,
) -> Event:
    """An event of an action, source `worker` (positional: a pipeline emits several per task)."""
    return _new(
        Event,
        (
            name,
            _WORKER,
            step,
            step_run_id,
            iteration,
            payload,
            event_id,
            None,
            None,
            None,
            task_run_id,
            attempt,
            None,
            action_id,
            None,
        ),
    )


# a task's record as a `task.done` payload carries it; a terminal event (`step.done`,
# `step.failed`, `loop.iteration.done`, `loop.iteration.failed`) may carry the record of its
# pipeline's last task call folded into its own payload (`fold_task`)
TASK_FIELDS = ("task", "attempt", "call", "status")


def fold_task(terminal: dict[str, Any], task_done: dict[str, Any]) -> None:
    """Fold a `task.done` payload into the payload of the terminal event that follows it (in
    place): its `task`, `attempt`, `call` and `status`, and what its `outcome` says that the
    terminal event does not — its result and error when they are not the terminal event's
    own objects, its meta when not empty — so a step's result is stored once."""
    for key in TASK_FIELDS:
        terminal[key] = task_done.get(key)
    outcome = task_done.get("outcome")
    if not isinstance(outcome, dict):
        return
    rest: dict[str, Any] = {}
    for key, value in outcome.items():
        if key == "status" and value == task_done.get("status"):
            continue
        if key in ("result", "error") and value is terminal.get(key):
            continue
        if key == "meta" and not value:
            continue
        rest[key] = value
    if rest:
        terminal["outcome"] = rest


def folded_task(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The `task.done` payload a terminal event's payload carries folded (`fold_task`), or
    None when it carries none."""
    if "call" not in payload or "task" not in payload:
        return None
    record = {key: payload.get(key) for key in TASK_FIELDS}
    outcome: dict[str, Any] = {
        "status": payload.get("status"),
        "result": payload.get("result"),
        "error": payload.get("error"),
        "meta": {},
    }
    rest = payload.get("outcome")
    if isinstance(rest, dict):
        outcome.update(rest)
    record["outcome"] = outcome
    return record


def is_input(event: Event) -> bool:
    """Does the control VM consume this event?"""
    return event.source in INPUT_SOURCES and event.name in INPUT_NAMES


class CommandKind(StrEnum):
    RUN = "run"  # run a step's pipeline, or one loop iteration
    CANCEL = "cancel"  # stop a running action (or a pending timer)
    TIMER = "timer"  # deliver `timer.fired` after `delay` seconds


class LazySlot:
    """A dataclass slot whose value is computed from the instance the first time it is read
    when its constructor left it None (the control VM's drafts), then kept. A data
    descriptor over the slot's own: reads of the class's other fields stay plain slot reads
    (a class `__getattr__` would slow them all); None rather than unset, because a read of
    an unset slot raises, and an exception per command costs more than the draft saves."""

    __slots__ = ("compute", "get", "slot")

    def __init__(self, slot: Any, compute: Any) -> None:
        self.slot = slot  # the slot's member descriptor
        self.get = slot.__get__
        self.compute = compute  # instance -> the value, or None when it cannot tell

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        value = self.get(instance, owner)
        if value is None:  # left to be computed: now, then kept
            value = self.compute(instance)
            self.slot.__set__(instance, value)
        return value

    def __set__(self, instance: Any, value: Any) -> None:
        self.slot.__set__(instance, value)

    def __delete__(self, instance: Any) -> None:
        self.slot.__delete__(instance)


class _CommandSlots:
    # the storage of `Command` and of the VM's `CommandDraft`: two subclasses of one layout,
    # so a filled draft becomes a command by assigning its `__class__` (the cheapest such
    # check); `_execution` is not a field: what a draft's `action_id` is computed from
    __slots__ = (
        "_execution",
        "action_id",
        "args",
        "delay",
        "item",
        "iteration",
        "kind",
        "step",
        "step_run_id",
    )  # fmt: skip

    action_id: str
    args: dict[str, Any]
    delay: float | None
    item: Any
    iteration: int | None
    kind: str
    step: str
    step_run_id: str
    _execution: str


@dataclass(frozen=True)
class Command(_CommandSlots):
    """What the runtime must do. `action_id` is stable per (step run, iteration): the same
    for every attempt, so tools can use it as an idempotency key (`action_id(execution_id,
    step_run_id, iteration)`).

    The control VM builds its commands as `CommandDraft`s and leaves `action_id` None, with
    the execution id kept aside: the id is computed the first time it is read, then kept,
    so a command nobody reads the id of (a replay's, an in-memory benchmark's) never
    hashes. Read from outside, such a command is any other `Command`."""

    __slots__ = ()

    kind: str
    step: str
    step_run_id: str
    args: dict[str, Any]
    action_id: str = ""
    iteration: int | None = None
    item: Any = None
    delay: float | None = None

    def key(self) -> tuple[Any, ...]:
        return (self.kind, self.step, self.step_run_id, self.iteration, self.action_id)

    def __reduce__(self) -> tuple[Any, ...]:
        fields = (self.kind, self.step, self.step_run_id, self.args, self.action_id,
                  self.iteration, self.item, self.delay)  # fmt: skip
        return (Command, fields)


class CommandDraft(_CommandSlots):
    """A `Command` as the control VM fills it in on its hot path: the same slots, assignable
    (a frozen class's `__setattr__` costs a Python call per field), made a `Command` by
    assigning its `__class__` once filled. Only the VM makes these; nothing else sees one.
    `action_id` is left None and `_execution` set (see `Command`)."""

    __slots__ = ()


def action_id(execution_id: str, step_run_id: str, iteration: int | None) -> str:
    """Stable per (step run, iteration): the same for every attempt (tool idempotency key)."""
    text = f"{execution_id}/{step_run_id}/{'' if iteration is None else iteration}"
    return sha256(text.encode()).hexdigest()[:32]


def _slots_under(cls: type, lazy: str, compute: Any) -> None:
    """Leave `cls`'s fields to its base's slots (dataclass keeps a field's default as a class
    attribute, which would hide the slot; its `__init__` has the defaults itself), with
    `lazy` computed by `compute(instance)` when left None (`LazySlot`)."""
    for name in cls.__dataclass_fields__:  # type: ignore[attr-defined]
        if name in cls.__dict__:
            delattr(cls, name)
    setattr(cls, lazy, LazySlot(getattr(cls.__mro__[1], lazy), compute))


def _action_id(command: Command) -> str | None:
    execution = getattr(command, "_execution", None)  # set on the VM's commands only
    return (
        None if execution is None else action_id(execution, command.step_run_id, command.iteration)
    )


_slots_under(Command, "action_id", _action_id)


# A server event as the control VM records it on its hot path: (name, step, step_run_id,
# iteration, payload, n, stamp) with stamp = (event id prefix, execution id), shared by the
# VM's records; `VMAnswer.events` turns records into `Event`s (id `PREFIXn`, source `server`). The
# payload of `step.scheduled` is kept as its args and that of `next.selected` as the
# transition id: their one-key dicts are built then, not per event.
ServerRecord = tuple[str, str | None, str | None, int | None, Any, int, tuple[str, str]]
# A route that admits its target at once, as one record of two events: (step, step_run_id,
# transition id, target step, target step_run_id, args, n, stamp) is `next.selected` (n - 1)
# then the target's `step.scheduled` (n: the VM's event count after the pair).
RoutedRecord = tuple[str, str, str, str, str, dict[str, Any], int, tuple[str, str]]


class _AnswerSlots:
    # the storage of `VMAnswer` and of the VM's `AnswerDraft` (as `_CommandSlots`)
    __slots__ = ("_records", "commands", "events")

    commands: list[Command]
    events: list[Event]
    _records: Any


@dataclass(frozen=True)
class VMAnswer(_AnswerSlots):
    """The control VM's answer to `start()` or to one input event: the `commands` it issues
    and the server `events` it recorded, in order. Unpacks as `commands, events`.

    The VM builds its answers as `AnswerDraft`s and hands over what it recorded in
    `_records` (a list of `Event`s and of the compact `ServerRecord`s / `RoutedRecord`s of
    its generated hot path, or one `RoutedRecord` alone — the answer of a generated handler
    that did everything, not wrapped in a list), leaving `events` None: the `Event`s are
    built the first time `events` is read, so an answer whose events nobody reads (a
    replay's, an in-memory benchmark's) builds none."""

    __slots__ = ()

    commands: list[Command]
    events: list[Event]

    def __iter__(self) -> Iterator[Any]:
        yield self.commands
        yield self.events

    def __reduce__(self) -> tuple[Any, ...]:
        return (VMAnswer, (self.commands, self.events))


class AnswerDraft(_AnswerSlots):
    """A `VMAnswer` as the control VM fills it in (as `CommandDraft` for `Command`):
    `commands` and `_records` set, then its `__class__` assigned."""

    __slots__ = ()


def _events(answer: VMAnswer) -> list[Event] | None:
    """The events of an answer the VM built: its records, as `Event`s (in place)."""
    records = getattr(answer, "_records", None)  # set on the VM's answers only
    if records is None:
        return None
    if type(records) is tuple:  # one `RoutedRecord`
        events: list[Any] = [records]
        materialize(events)
    else:
        events = records
        for record in events:
            if type(record) is tuple:  # not an `Event` yet
                materialize(events)
                break
    _SET_RECORDS(answer, events)  # the answer is frozen: its base's slot
    return events


_SET_RECORDS = _AnswerSlots.__dict__["_records"].__set__
_slots_under(VMAnswer, "events", _events)


def answer(commands: list[Command], records: Any) -> VMAnswer:
    """A `VMAnswer` of the VM's commands and records (see `VMAnswer`)."""
    draft = AnswerDraft()
    draft.commands = commands
    draft._records = records
    draft.events = None  # type: ignore[assignment]  # built when first read (`_events`)
    draft.__class__ = VMAnswer  # type: ignore[assignment]
    return draft  # type: ignore[return-value]


def materialize(records: list[Any]) -> None:
    """Turn the `ServerRecord`s and `RoutedRecord`s of a list into `Event`s, in place (events
    stay as they are)."""
    events: list[Event] = []
    add = events.append
    for record in records:
        if type(record) is not tuple:
            add(record)
        elif len(record) == 8:  # a `RoutedRecord`
            step, run_id, transition, target, target_run, args, n, (prefix, execution_id) = record
            add(_new(Event, (_NEXT_SELECTED, _SERVER, step, run_id, None, {"to": transition},
                             f"{prefix}{n - 1}", execution_id, None, None, None, None, None,
                             None, None)))  # fmt: skip
            add(_new(Event, (_STEP_SCHEDULED, _SERVER, target, target_run, None, {"args": args},
                             f"{prefix}{n}", execution_id, None, None, None, None, None,
                             None, None)))  # fmt: skip
        else:
            name, step, run_id, iteration, payload, n, (prefix, execution_id) = record
            if name == _STEP_SCHEDULED:
                payload = {"args": payload}
            elif name == _NEXT_SELECTED:
                payload = {"to": payload}
            add(_new(Event, (name, _SERVER, step, run_id, iteration, payload, f"{prefix}{n}",
                             execution_id, None, None, None, None, None, None, None)))  # fmt: skip
    records[:] = events


_STEP_SCHEDULED = EventName.STEP_SCHEDULED.value
_NEXT_SELECTED = EventName.NEXT_SELECTED.value


__all__ = [
    "ENVELOPE",
    "INPUT_NAMES",
    "INPUT_SOURCES",
    "RESULT_NAMES",
    "TASK_FIELDS",
    "TERMINAL_NAMES",
    "AnswerDraft",
    "Command",
    "CommandDraft",
    "CommandKind",
    "Event",
    "EventName",
    "LazySlot",
    "RoutedRecord",
    "ServerRecord",
    "Source",
    "VMAnswer",
    "action_event",
    "action_id",
    "answer",
    "envelope",
    "fold_task",
    "folded_task",
    "is_input",
    "materialize",
    "recorded",
]
