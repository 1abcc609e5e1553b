"""One execution's control VM and what every runtime does around it.

The embedded runtime (runtime/embedded.py), the distributed server (runtime/server.py) and
replay (runtime/replay.py) drive the control VM the same way, through a `Driver`:

* **the program** comes from the stored execution: the store's record (`stored_program`) or
  the execution's first event, `playbook.execution.requested` (`program_from_requested`);
* **construction** gives the VM what the runtime lends it — the `keychain` namespace and the
  resolver of reference-first results — once; nothing else writes the VM's scope;
* **feeding an input event** (`feed`): the values of the references the event carries are
  loaded first (`LoadedResults.load`), then the VM takes the event. During `step` a guard that
  reads a recent reference finds its value in memory; the values kept are bounded, and one
  dropped since is read again by its key (the SHA-256 of its JSON: the same value), so a
  replay, which loads the same references from the same events, evaluates every guard the
  same way;
* **event ids**: the VM names its server events `EXECUTION:sN` (N counts them from the
  start), so a rebuilt VM regenerates the ids of the events the log holds, and the ones a
  dead owner decided but never appended (`replay`);
* **the summary** (`summary`): the JSON line of `noetl-vm run --json`, results expanded.

Timers are runtime/timers.py's `Timers` (both runtimes arm them on their asyncio loop).
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from noetlc.expr.limits import begin_input, end_input
from noetlc.expr.runtime import REF_KEY
from noetlc.runtime.results import (
    SUMMARY_INLINE_BYTES,
    References,
    ResultSpill,
    ResultStore,
    reference_limit,
)
from noetlc.runtime.stored_program import decode_program
from noetlc.vm.control import ControlVM
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.protocol import (
    Event,
    EventName,
    Source,
    VMAnswer,
    envelope,
    is_input,
)

REQUESTED = EventName.EXECUTION_REQUESTED

# what `LoadedResults` keeps of the values of loaded references
MAX_LOADED_VALUES = 256
MAX_LOADED_BYTES = 64 * 1024 * 1024


# Decoded programs by the SHA-256 of their container bytes: the executions of one program
# share one decoded, verified copy (its expressions compiled, its VM tables built once), so
# a server holding many waiting executions keeps only their state. Bounded: least recently
# used programs are dropped (an execution keeps its own reference).
SHARED_PROGRAMS = 64
_programs: OrderedDict[bytes, LoadedProgram] = OrderedDict()
_programs_lock = threading.Lock()


def shared_program(data: bytes) -> LoadedProgram:
    """The decoded program of container bytes, shared with every execution of the same bytes;
    `BytecodeError` (NOE70x) when they are not a valid program (never cached)."""
    key = hashlib.sha256(data).digest()
    with _programs_lock:
        program = _programs.get(key)
        if program is not None:
            _programs.move_to_end(key)
            return program
    program = LoadedProgram(decode_program(data))  # outside the lock: decoding takes milliseconds
    with _programs_lock:
        _programs[key] = program
        while len(_programs) > SHARED_PROGRAMS:
            _programs.popitem(last=False)
    return program


def program_from_requested(event: Mapping[str, Any]) -> tuple[LoadedProgram, dict[str, Any]]:
    """The program and workload a submission recorded in its first event."""
    payload = event["payload"]
    program = shared_program(base64.b64decode(payload["program"]))
    return program, dict(payload.get("workload") or {})


def stored_program(record: Mapping[str, Any] | None) -> tuple[LoadedProgram, dict[str, Any]]:
    """The program and workload a store keeps with an execution (`EventStore.execution`)."""
    if record is None or record.get("program") is None:
        raise LookupError("the execution has no stored program")
    return LoadedProgram(decode_program(record["program"])), dict(record.get("workload") or {})


def requested(
    execution_id: str, playbook: str, workload: dict[str, Any], parent_id: str | None
) -> Event:
    """The first event of an embedded execution (its program is in the store's record)."""
    return envelope(
        REQUESTED,
        Source.CLIENT,
        event_id=f"{execution_id}:requested",
        parent_id=parent_id,
        payload={"playbook": playbook, "workload": workload},
    )


def resumed(event_id: str, after_seq: int) -> Event:
    return envelope(
        EventName.EXECUTION_RESUMED,
        Source.CLIENT,
        event_id=event_id,
        payload={"after_seq": after_seq},
    )


def client_request(event_id: str, request: Mapping[str, Any]) -> Event | None:
    """A `cancel` or `signal` request of another process as the input event it becomes."""
    if request["kind"] == "cancel":
        name, payload = EventName.EXECUTION_CANCELLED, {"request_id": request["request_id"]}
        data = request.get("data")
        if isinstance(data, dict) and isinstance(data.get("reason"), str):
            payload["reason"] = data["reason"]  # the requester's own words
    elif request["kind"] == "signal":
        name = EventName.SIGNAL_RECEIVED
        payload = {
            "request_id": request["request_id"],
            "name": request["name"],
            "data": request["data"],
        }
    else:
        return None
    return envelope(name, Source.CLIENT, event_id=event_id, payload=payload)


def cancel_requested(event_id: str, reason: str | None) -> Event:
    """A distributed cancel request: the owning server answers it with `execution.cancelled`
    (runtime/server.py `_cancel`)."""
    payload = {} if reason is None else {"reason": reason}
    # stamped by the store when appended
    return envelope(EventName.CANCEL_REQUESTED, Source.CLIENT, event_id=event_id, payload=payload)


def cancelled(event_id: str, reason: str) -> Event:
    return envelope(
        EventName.EXECUTION_CANCELLED, Source.CLIENT, event_id=event_id, payload={"reason": reason}
    )


class LoadedResults:
    """The values of the references the control VM has been given, keyed by their key: the
    VM's resolver reads them from memory. `load` reads the result store (before the event is
    fed). The values held are bounded (`max_values` values, `max_bytes` of stored JSON; the
    most recent one is always kept): a long execution whose steps return large results keeps
    the latest ones, not one per step run. A key is the SHA-256 of the value's JSON, so a
    value dropped and read again is the same value: `resolve` reads the store only for a
    reference loaded long ago and dropped since, and a replay evaluates guards the same way."""

    __slots__ = ("bytes", "max_bytes", "max_values", "refs", "reloads", "sizes", "values")

    def __init__(
        self,
        refs: References | None,
        *,
        max_values: int | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.refs = refs
        self.values: dict[str, Any] = {}  # insertion order: the oldest first
        self.sizes: dict[str, int] = {}
        self.bytes = 0
        self.max_values = MAX_LOADED_VALUES if max_values is None else max_values
        self.max_bytes = MAX_LOADED_BYTES if max_bytes is None else max_bytes
        self.reloads = 0  # values read again after being dropped

    def load(self, event: Event) -> None:
        payload = event.payload
        if not payload:
            return
        result = payload.get("result")
        if type(result) is dict and REF_KEY in result:
            self._load(result[REF_KEY])

    def _load(self, body: Any) -> None:
        key = str(body.get("key")) if isinstance(body, dict) else ""
        if key in self.values or self.refs is None:
            return
        self._keep(key, self.refs.resolve(body), body)

    def _keep(self, key: str, value: Any, body: dict[str, Any]) -> None:
        size = body.get("size")
        size = size if isinstance(size, int) and size > 0 else 0
        values, sizes = self.values, self.sizes
        values[key] = value
        sizes[key] = size
        self.bytes += size
        while len(values) > 1 and (len(values) > self.max_values or self.bytes > self.max_bytes):
            oldest = next(iter(values))
            del values[oldest]
            self.bytes -= sizes.pop(oldest)

    def resolve(self, body: dict[str, Any]) -> Any:
        key = str(body.get("key"))
        try:
            return self.values[key]
        except KeyError:
            pass
        if self.refs is None:
            raise LookupError(f"result {key} was not loaded with the event that holds it")
        value = self.refs.resolve(body)  # loaded once and dropped since: the same value
        self.reloads += 1
        self._keep(key, value, body)
        return value

    def expand(self, value: Any) -> Any:
        """A value with its top-level reference replaced by what it refers to."""
        if isinstance(value, dict) and REF_KEY in value and len(value) == 1:
            body = value[REF_KEY]
            self._load(body)
            return self.resolve(body)
        if isinstance(value, list):
            return [self.expand(v) for v in value]
        return value


class Driver:
    """One execution's control VM, fed the way every runtime feeds it."""

    __slots__ = ("execution_id", "loaded", "program", "refs", "vm", "workload")

    def __init__(
        self,
        program: LoadedProgram,
        execution_id: str,
        workload: dict[str, Any],
        *,
        results: ResultStore | None = None,
        keychain: dict[str, Any] | None = None,
        spill: bool = False,
    ) -> None:
        self.program = program
        self.execution_id = execution_id
        self.workload = workload
        # the result store: large worker results are put there, references read back
        self.refs = (
            None if results is None else References(results, reference_limit(program.executor_spec))
        )
        self.loaded = LoadedResults(self.refs)
        self.vm = ControlVM(
            program,
            workload,
            execution_id,
            keychain=keychain,
            resolve=None if self.refs is None else self.loaded.resolve,
            # a long loop's results go to the result store in chunks (vm/loop_results.py)
            spill=ResultSpill(self.refs.store)
            if spill and self.refs is not None and self.refs.limit is not None
            else None,
        )

    def start(self) -> VMAnswer:
        return self.vm.start()

    def feed(self, event: Event) -> VMAnswer:
        """One input event: load the references it carries, then let the VM decide (its
        slow-path evaluations share one budget: `noetlc.expr.limits.begin_input`)."""
        if event.payload:
            self.loaded.load(event)
        begin_input()
        try:
            return self.vm.step(event)
        finally:
            end_input()

    def replay(self, records: Iterable[Mapping[str, Any]]) -> VMAnswer:
        """Rebuild the VM from a log: `start()` and every recorded input event, in order.
        Returns every server event regenerated (the log's and any a dead process decided but
        never appended) and the commands issued and not answered yet."""
        vm = self.vm
        events = vm.start().events
        for record in records:
            event = Event.from_record(record)
            if is_input(event):
                events.extend(self.feed(event).events)
        return VMAnswer(vm.outstanding(), events)

    def summary(self, events: int) -> dict[str, Any]:
        """The JSON line of `noetl-vm run --json` (shared/corpus/conformance/README.md):
        results stored by reference are shown as values."""
        summary_ = summary(self.vm, events)
        if self.refs is not None:
            for record in summary_["steps"].values():
                record["result"] = self._shown(record["result"])
            summary_["result"] = self._shown(summary_["result"])
        return summary_

    def _shown(self, value: Any) -> Any:
        """A result as the summary shows it: the value, or a reference past
        SUMMARY_INLINE_BYTES; a reference that big, or a long loop's result
        (vm/loop_results.py) past `max_payload_bytes` (as an event would carry it), is kept
        as it is, never loaded only to be shown or stored again."""
        refs = self.refs
        assert refs is not None
        if type(value) is dict and len(value) == 1 and type(value.get(REF_KEY)) is dict:
            body = value[REF_KEY]
            size = body.get("size")
            size = size if isinstance(size, int) else 0
            spill = self.vm.spill
            if size > SUMMARY_INLINE_BYTES or (
                isinstance(spill, ResultSpill)
                and body.get("key") in spill.joined
                and refs.limit is not None
                and size > refs.limit
            ):
                return value
        return refs.summary_value(self.loaded.expand(value))


def summary(vm: ControlVM, events: int) -> dict[str, Any]:
    """The summary of a VM as it stands (references not expanded: `Driver.summary` does)."""
    return {
        "execution_id": vm.execution_id,
        "status": vm.status,
        "steps": {
            name: {"runs": rec.runs, "status": _ended(vm.status, rec.status), "result": rec.result}
            for name, rec in vm.steps.items()
        },
        "ctx": vm.ctx,
        "result": vm.final_result,
        "events": events,
        "error": vm.error if vm.status != "completed" else None,
    }


def failed_summary(execution_id: str, error: dict[str, Any], events: int) -> dict[str, Any]:
    """The summary of an execution that failed before or outside its VM (it could not start,
    or a server refused it): the shape of `summary`, nothing run."""
    return {
        "execution_id": execution_id,
        "status": "failed",
        "steps": {},
        "ctx": {},
        "result": None,
        "events": events,
        "error": error,
    }


def _ended(execution: str, step: str | None) -> str | None:
    """A step still `running` when its execution ended was stopped with it: `cancelled`."""
    return "cancelled" if step == "running" and execution != "running" else step


__all__ = [
    "REQUESTED",
    "Driver",
    "LoadedResults",
    "cancel_requested",
    "cancelled",
    "client_request",
    "program_from_requested",
    "requested",
    "resumed",
    "stored_program",
    "summary",
]
