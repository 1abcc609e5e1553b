"""The PostgreSQL database behind the synchronous `EventStore` interface of the command line.

`noetl-vm events|status|replay|cancel|signal --db postgresql://...` and `submit` use it: each
call runs the asyncio operation of `runtime/postgres` on a private event loop thread. The
program and workload of an execution live in its first event
(`playbook.execution.requested`), so `execution()` reads them from there. `request()` does not
queue anything: a signal, or a request to cancel, is appended to the execution's log as a
client event, where the owning server reads it like any other input.
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

from noetlc.ir.events import EventName
from noetlc.runtime.driver import cancel_requested
from noetlc.runtime.event_store import Appendable, StoreError
from noetlc.runtime.postgres.database import Database
from noetlc.runtime.postgres.errors import DatabaseError
from noetlc.runtime.stored_program import requested_event
from noetlc.vm.protocol import Source, envelope

T = TypeVar("T")


class PostgresStore:
    def __init__(self, url: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        try:
            self.db: Database = self._call(Database.open(url, max_size=4))
        except DatabaseError as exc:
            self._stop()
            raise StoreError(exc.code, str(exc), exc.hint) from None

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    # ------------------------------------------------------------------ EventStore

    def create_execution(
        self,
        execution_id: str,
        playbook: str,
        *,
        program: bytes | None = None,
        workload: dict[str, Any] | None = None,
        parent_id: str | None = None,
    ) -> None:
        self._call(self.db.events.create_execution(execution_id, playbook, parent_id))
        requested = requested_event(
            execution_id, playbook, program or b"", workload or {}, parent_id
        )
        self._call(self.db.events.append(execution_id, [requested]))

    def offer(self, execution_id: str) -> None:
        self._call(self.db.owners.offer([execution_id]))

    def submit(
        self,
        execution_id: str,
        playbook: str,
        *,
        program: bytes,
        workload: dict[str, Any],
        parent_id: str | None = None,
    ) -> None:
        """`create_execution` then `offer`, in one transaction."""
        requested = requested_event(execution_id, playbook, program, workload, parent_id)
        self._call(self.db.events.submit(execution_id, playbook, parent_id, requested))

    def append(self, execution_id: str, events: Appendable) -> int:
        return len(self._call(self.db.events.append(execution_id, events)))

    def finish_execution(self, execution_id: str, status: str, summary: dict[str, Any]) -> None:
        self._call(self.db.events.finish_execution(execution_id, status, summary))
        if status == "cancelled":
            self._call(self.db.queue.cancel_execution(execution_id))

    def read(self, execution_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        return self._call(self.db.events.read(execution_id, after_seq))

    def wait_for_events(self, execution_id: str, after_seq: int, timeout: float) -> bool:
        return self._call(self.db.events.wait_for_events(execution_id, after_seq, timeout))

    def executions(self) -> list[dict[str, Any]]:
        return [_public(r) for r in self._call(self.db.events.executions())]

    def state(self, execution_id: str) -> dict[str, Any] | None:
        """The execution's row (status, summary, last_seq), without its program and workload:
        what a waiting client polls."""
        record = self._call(self.db.events.execution(execution_id))
        return None if record is None else _public(record)

    def execution(self, execution_id: str) -> dict[str, Any] | None:
        out = self.state(execution_id)
        if out is None:
            return None
        # the first event only (it carries the program): never the whole log
        first = self._call(self.db.events.read(execution_id, 0, 1))
        if first and first[0]["name"] == EventName.EXECUTION_REQUESTED:
            payload = first[0]["payload"]
            out["workload"] = payload.get("workload")
            program = payload.get("program")
            out["program"] = base64.b64decode(program) if program else None
        else:
            out["workload"], out["program"] = None, None
        return out

    def request(
        self, execution_id: str, kind: str, name: str | None = None, data: Any = None
    ) -> int:
        """A cancel or signal request, appended to the log while it has not ended (0, and
        nothing appended, once it has). A cancel is a request the owning server answers with
        the one `execution.cancelled` (runtime/server.py `_cancel`): the client cannot know
        what the server decided but has not appended yet."""
        event_id = f"{execution_id}:request:{uuid.uuid4().hex}"
        if kind == "cancel":
            event = cancel_requested(event_id, cancel_payload(data).get("reason"))
        else:
            payload = {"name": name, "data": data}
            label = EventName.SIGNAL_RECEIVED
            event = envelope(
                label, Source.CLIENT, event_id=event_id, ts=time.time(), payload=payload
            )
        stored = self._call(self.db.events.append_if(execution_id, [event]))
        return stored[0][1] if stored else 0

    def end_cancelled(self, execution_id: str, reason: str) -> bool:
        """`cancel --now`: the one terminal event appended here, for an execution no server
        runs any more; False when its log has ended already."""
        event = envelope(
            EventName.EXECUTION_CANCELLED,
            Source.CLIENT,
            event_id=f"{execution_id}:cancel-now:{uuid.uuid4().hex}",
            ts=time.time(),
            payload=cancel_payload({"reason": reason}),
        )
        return self._call(self.db.events.append_if(execution_id, [event])) is not None

    def requests(self, execution_id: str, after_id: int = 0) -> list[dict[str, Any]]:
        return []  # requests are log events here: the server reads them with the log

    def put_result(self, key: str, data: bytes) -> None:
        self._call(self.db.results.put(key, data))

    def get_result(self, key: str) -> bytes | None:
        return self._call(self.db.results.get(key))

    def append_logs(self, execution_id: str, rows: list[dict[str, Any]]) -> None:
        self._call(self.db.logs.append(execution_id, rows))

    def read_logs(
        self,
        execution_id: str,
        after: int = 0,
        step: str | None = None,
        iteration: int | None = None,
        limit: int = 1000,
    ) -> list[dict[str, Any]]:
        return self._call(self.db.logs.read(execution_id, after, step, iteration, limit))

    def close(self) -> None:
        try:
            self._call(self.db.close())
        finally:
            self._stop()


def cancel_payload(data: Any) -> dict[str, Any]:
    """The payload of a cancel: the requester's own words, when a text."""
    if isinstance(data, dict) and isinstance(data.get("reason"), str):
        return {"reason": data["reason"]}
    return {}


def _public(record: dict[str, Any]) -> dict[str, Any]:
    out = dict(record)
    out.setdefault("parent_id", out.pop("parent_execution_id", None))
    return out
