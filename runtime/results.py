"""Reference-first results: a result larger than `limits.max_payload_bytes`
(default 1 MiB) is kept in the store's result table and events carry a reference,
`{"$ref": {"store", "key", "size", "checksum"}}`. Templates resolve references transparently
(the scope's `$resolve`, expr/runtime.py); tool arguments get the value; summaries show it.
Keys are the SHA-256 of the JSON text, so equal results are stored once.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from noetlc.expr.runtime import REF_KEY
from noetlc.ir.events import EventName
from noetlc.runtime.event_store import encode_payload
from noetlc.vm.protocol import RESULT_NAMES, Event

DEFAULT_LIMIT = 1024 * 1024
# a summary shows a step's result inline up to this size, a reference past it (a loop of
# 100,000 iterations made a 177 MB summary line)
SUMMARY_INLINE_BYTES = 16 * 1024 * 1024


class StorageOverBudget(Exception):
    """A result goes over the `result_bytes` or `stored_bytes` budget (NOE858): the action's
    result is replaced by this error, so the log stays bounded and a replay sees the same."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.error = error
        super().__init__(error["message"])


def payload_limit(payload: dict[str, Any]) -> int | None:
    """`reference_limit` of a program's payload map."""
    return reference_limit(payload.get("executor_spec"))


def reference_limit(spec: dict[str, Any] | None) -> int | None:
    """`executor.spec.policy.limits.max_payload_bytes` of a program's executor spec; None
    when `results.reference_first` is false."""
    policy = ((spec or {}).get("policy")) or {}
    if (policy.get("results") or {}).get("reference_first") is False:
        return None
    limit = (policy.get("limits") or {}).get("max_payload_bytes")
    return int(limit) if isinstance(limit, int) and limit > 0 else DEFAULT_LIMIT


class ResultStore(Protocol):
    """Where large results live: an `EventStore`, or a distributed server's or worker's
    `BlockingResults` (runtime/postgres/blocking_results.py)."""

    def put_result(self, key: str, data: bytes) -> None: ...
    def get_result(self, key: str) -> bytes | None: ...


class References:
    def __init__(
        self, store: ResultStore, limit: int | None, budgets: dict[str, int] | None = None
    ) -> None:
        self.store = store
        self.limit = limit
        self.stored = 0
        # storage budgets (vm/budgets.py; 0: none): one result, and all of an execution's
        self.max_result = (budgets or {}).get("result_bytes", 0)
        self.max_total = (budgets or {}).get("stored_bytes", 0)
        self.total = 0  # bytes of the results measured (inline or by reference)
        self.by_step: dict[str, list[int]] = {}  # step -> [bytes, results]
        self.active = limit is not None or bool(self.max_result or self.max_total)
        # distributed: the execution's total is counted by the database, not here; event id
        # -> the bytes of its results, for the worker to reserve (runtime/stored_budget.py)
        self.measured: dict[str, int] | None = None
        self.shared_limit = 0

    def share_total(self, limit: int) -> None:
        """Distributed: measure each result event's bytes into `measured` for the worker to
        reserve against the execution's `stored_bytes` (`limit`) with the other workers."""
        self.measured, self.shared_limit, self.active = {}, limit, True

    def shrink(self, value: Any, step: str | None = None, sizes: list[int] | None = None) -> Any:
        """The value itself, or a reference to it when its JSON is over the limit. Raises
        `StorageOverBudget` (before storing anything) past a storage budget."""
        if not self.active or value is None or isinstance(value, bool | int | float):
            return value
        text = encode_payload(value)  # what the store writes, so the limit is the log's size
        self._count(len(text), step)  # ASCII JSON: characters are bytes
        if sizes is not None:
            sizes.append(len(text))
        # the limit is in UTF-8 bytes: an ASCII text has as many as characters
        if self.limit is None or (
            len(text) <= self.limit and (text.isascii() or len(text.encode()) <= self.limit)
        ):
            return value
        data = text.encode()
        key = hashlib.sha256(data).hexdigest()
        self.store.put_result(key, data)
        self.stored += 1
        return {REF_KEY: {"store": "results", "key": key, "size": len(data), "checksum": key}}

    def resolve(self, body: dict[str, Any]) -> Any:
        data = self.store.get_result(str(body.get("key")))
        if data is None:
            raise LookupError(f"result {body.get('key')} is not in the result store")
        return json.loads(data)

    def expand(self, value: Any) -> Any:
        """A value with its top-level reference replaced by what it refers to."""
        if isinstance(value, dict) and REF_KEY in value and len(value) == 1:
            return self.resolve(value[REF_KEY])
        if isinstance(value, list):
            return [self.expand(v) for v in value]
        return value

    def shrink_event(self, event: Event) -> None:
        """Results in a worker event: the terminal result and each task outcome's result (the
        payload is changed in place: the event is not logged yet)."""
        payload = event.payload
        if not isinstance(payload, dict):
            return
        step = event.step
        sizes: list[int] | None = None if self.measured is None else []
        if "result" in payload:
            payload["result"] = self.shrink(payload["result"], step, sizes)
        outcome = payload.get("outcome")
        if isinstance(outcome, dict) and "result" in outcome:
            result = self.shrink(outcome["result"], step, sizes)
            payload["outcome"] = {**outcome, "result": result}
        if sizes and self.measured is not None:
            if len(self.measured) > 100_000:  # events never committed (lost leases)
                self.measured.clear()
            self.measured[str(event.event_id)] = sum(sizes)

    def _count(self, size: int, step: str | None) -> None:
        name = step or "?"
        if self.max_result and size > self.max_result:
            raise StorageOverBudget(
                _over(
                    "result_bytes",
                    size,
                    self.max_result,
                    f"the result of step `{name}` is {size:,} bytes",
                    name,
                )
            )
        if self.max_total and self.total + size > self.max_total:
            grown = max(self.by_step.items(), key=lambda kv: kv[1][0], default=(name, [0, 0]))
            what = (
                f"the results of this execution reached {self.total + size:,} bytes (step"
                f" `{grown[0]}` grew most: {grown[1][0]:,} bytes in {grown[1][1]:,} results)"
            )
            raise StorageOverBudget(
                _over("stored_bytes", self.total + size, self.max_total, what, name)
            )
        self.total += size
        counted = self.by_step.setdefault(name, [0, 0])
        counted[0] += size
        counted[1] += 1

    def count_logged(self, events: list[dict[str, Any]]) -> None:
        """Count the results a log already holds (a resumed execution keeps its budget)."""
        for event in events:
            payload = event.get("payload")
            if event.get("source") != "worker" or not isinstance(payload, dict):
                continue
            value = payload.get("result")
            if value is None or isinstance(value, bool | int | float):
                continue
            ref = value.get(REF_KEY) if isinstance(value, dict) else None
            size = int(ref.get("size", 0)) if isinstance(ref, dict) else len(encode_payload(value))
            self.total += size
            counted = self.by_step.setdefault(str(event.get("step")), [0, 0])
            counted[0] += size
            counted[1] += 1

    def summary_value(self, value: Any) -> Any:
        """A summary's value: itself, or a reference past `SUMMARY_INLINE_BYTES`."""
        if value is None or isinstance(value, bool | int | float | str):
            return value
        text = encode_payload(value)
        if len(text) <= SUMMARY_INLINE_BYTES:
            return value
        data = text.encode()
        key = hashlib.sha256(data).hexdigest()
        self.store.put_result(key, data)
        return {REF_KEY: {"store": "results", "key": key, "size": len(data), "checksum": key}}


class ResultSpill:
    """A long loop's iteration results in the result store (vm/loop_results.py's `Spill`):
    chunks stored as their JSON, the loop's result assembled from the chunks' texts without
    decoding them, so it is never held as objects. Keys are the SHA-256 of the JSON text,
    the same text `encode_payload` gives for the value (a replay stores the same)."""

    def __init__(self, store: ResultStore) -> None:
        self.store = store
        self.joined: set[str] = set()  # the keys of the loops' results assembled here

    def _put(self, data: bytes) -> dict[str, Any]:
        key = hashlib.sha256(data).hexdigest()
        self.store.put_result(key, data)
        return {"store": "results", "key": key, "size": len(data), "checksum": key}

    def put(self, values: list[Any]) -> str:
        return str(self._put(encode_payload(values).encode())["key"])

    def get(self, key: str) -> list[Any]:
        data = self.store.get_result(key)
        if data is None:
            raise LookupError(f"result {key} is not in the result store")
        values: list[Any] = json.loads(data)
        return values

    def join(self, parts: list[str | list[Any]], stats: dict[str, Any]) -> dict[str, Any]:
        inner: list[bytes] = []
        for part in parts:
            if isinstance(part, str):
                data = self.store.get_result(part)
                if data is None:
                    raise LookupError(f"result {part} is not in the result store")
            else:
                data = encode_payload(part).encode()
            inner.append(data[1:-1])  # the chunk's items, without its brackets
        head = encode_payload({"results": [], "stats": stats}).encode()
        opening = b'{"results":['
        assert head.startswith(opening + b"]")
        data = opening + b",".join(inner) + head[len(opening) :]
        body = self._put(data)
        self.joined.add(str(body["key"]))
        return {REF_KEY: body}


def over_budget_event(event: Event, error: dict[str, Any]) -> Event:
    """A worker result past a storage budget, as the failure it becomes (a `task.done`
    keeps its record without the result)."""
    if event.name in RESULT_NAMES:
        name = (
            EventName.LOOP_ITERATION_FAILED
            if event.iteration is not None
            else EventName.STEP_FAILED
        )
        return event._replace(name=name.value, payload={"error": error})
    return event._replace(payload={**(event.payload or {}), "outcome": {"error": error}})


def stored_over_budget(total: int, limit: int, step: str | None, size: int) -> dict[str, Any]:
    """The NOE858 error of a result past the execution's `stored_bytes` (distributed)."""
    name = step or "?"
    what = (
        f"the results of this execution reached {total:,} bytes (step `{name}`'s result:"
        f" {size:,} bytes)"
    )
    return _over("stored_bytes", total, limit, what, name)


def _over(name: str, count: int, limit: int, what: str, step: str) -> dict[str, Any]:
    return {
        "code": "NOE858",
        "type": "BudgetExceeded",
        "message": f"{what}, over the {name} budget ({limit:,})",
        "step": step,
        "budget": name,
        "counts": {name: count},
    }
