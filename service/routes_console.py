"""What the console reads beside NoETL's routes: an execution's task logs (JSON, or followed
as a server-sent event stream) and its step graph (from the program it ran)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from noetlc.runtime.logs import log_rows_view
from noetlc.service.deps import ExecutionId, ServiceDep
from noetlc.service.errors import error_responses, not_found
from noetlc.service.models import LogsPage, StepGraph
from noetlc.service.routes_executions import record_of
from noetlc.service.state import Service
from noetlc.service.views import STATUS

router = APIRouter(prefix="/api", tags=["console"], responses=error_responses())


@router.get(
    "/executions/{execution_id:digits}/logs",
    response_model=LogsPage,
    responses={200: {"content": {"text/event-stream": {}}}},
)
def execution_logs(
    execution_id: ExecutionId,
    request: Request,
    service: ServiceDep,
    step: str | None = Query(None, max_length=1000, description="only this step's output"),
    iteration: int | None = Query(None, ge=0, le=2**31 - 1, description="only this iteration"),
    after: int = Query(0, ge=0, le=2**62, description="rows after this `seq` (the cursor)"),
    limit: int = Query(1000, ge=1, le=5000),
    follow: bool = Query(False, description="a live server-sent event stream"),
) -> Any:
    """What the execution's tasks printed, oldest first: rows `{seq, ts, step, iteration,
    task, attempt, stream, text}` (bounded per task and per execution, with a marker line
    where cut; escaped; redacted). `next_after` is the cursor of the next page. With
    `follow=true` (or `Accept: text/event-stream`) a live stream: `event: log` per row, a
    final `event: end` once the execution ended and every row was sent."""
    record = record_of(service, execution_id)
    if follow or "text/event-stream" in request.headers.get("accept", ""):
        return StreamingResponse(
            _follow(service, execution_id, step, iteration, after, request),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    rows = log_rows_view(service.engine.logs(execution_id, after, step, iteration, limit))
    return {
        "execution_id": execution_id,
        "status": STATUS.get(record["status"], record["status"]),
        "logs": rows,
        "next_after": rows[-1]["seq"] if rows else after,
        "more": len(rows) == limit,
    }


async def _follow(
    service: Service,
    execution_id: str,
    step: str | None,
    iteration: int | None,
    after: int,
    request: Request,
) -> AsyncIterator[str]:
    last_beat = time.monotonic()
    while True:
        rows = await asyncio.to_thread(service.engine.logs, execution_id, after, step, iteration)
        if rows:  # one chunk per read
            after = int(rows[-1]["seq"])
            yield "".join(_sse(row) for row in log_rows_view(rows))
            continue
        record = await asyncio.to_thread(service.engine.execution, execution_id)
        if record is not None and record["status"] != "running":
            rest = await asyncio.to_thread(
                service.engine.logs, execution_id, after, step, iteration
            )
            if rest:
                yield "".join(_sse(row) for row in log_rows_view(rest))
            status = STATUS.get(record["status"], record["status"])
            yield f"event: end\ndata: {json.dumps({'status': status})}\n\n"
            return
        if await request.is_disconnected():
            return
        if time.monotonic() - last_beat > 15:
            last_beat = time.monotonic()
            yield ": keep-alive\n\n"
        await asyncio.sleep(0.2)


def _sse(row: dict[str, Any]) -> str:
    return f"id: {row['seq']}\nevent: log\ndata: {json.dumps(row)}\n\n"


@router.get("/executions/{execution_id:digits}/graph", response_model=StepGraph)
def execution_graph(execution_id: ExecutionId, service: ServiceDep) -> dict[str, Any]:
    """The step graph of the program the execution runs (as `GET /api/catalog/graph`)."""
    record = record_of(service, execution_id)
    if not record.get("program"):
        raise not_found(f"Execution {execution_id} has no stored program")
    from noetlc.service.graph import step_graph

    return step_graph(record["program"])
