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
from noetlc.runtime.store import encode_payload
from noetlc.vm.protocol import Event

DEFAULT_LIMIT = 1024 * 1024


def payload_limit(payload: dict[str, Any]) -> int | None:
    """`executor.spec.policy.limits.max_payload_bytes`; None when `results.reference_first`
    is false."""
    policy = ((payload.get("executor_spec") or {}).get("policy")) or {}
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
    def __init__(self, store: ResultStore, limit: int | None) -> None:
        self.store = store
        self.limit = limit
        self.stored = 0

    def shrink(self, value: Any) -> Any:
        """The value itself, or a reference to it when its JSON is over the limit."""
        if self.limit is None or value is None or isinstance(value, bool | int | float):
            return value
        text = encode_payload(value)  # what the store writes, so the limit is the log's size
        # the limit is in UTF-8 bytes: an ASCII text has as many as characters
        if len(text) <= self.limit and (text.isascii() or len(text.encode()) <= self.limit):
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
        if "result" in payload:
            payload["result"] = self.shrink(payload["result"])
        outcome = payload.get("outcome")
        if isinstance(outcome, dict) and "result" in outcome:
            payload["outcome"] = {**outcome, "result": self.shrink(outcome["result"])}
