"""Execution routes: execute, list, detail, status, events (JSON, or a live server-sent event
stream), cancel, signal, rerun, cleanup."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from noetlc.service.deps import ExecutionId, ServiceDep
from noetlc.service.errors import (
    BAD_REQUEST,
    TOO_LARGE,
    ApiError,
    bad_request,
    error_responses,
    not_found,
)
from noetlc.service.models import (
    Cancelled,
    CleanedUp,
    EventsPage,
    ExecutionDetail,
    ExecutionSummary,
    Signalled,
    Started,
    StatusView,
)
from noetlc.service.progress import StepProgress
from noetlc.service.registry import EXECUTABLE
from noetlc.service.routes_catalog import BY_ID_OR_PATH, Version, by_id_or_path, find_entry
from noetlc.service.state import PROGRESS_KEPT, Service
from noetlc.service.views import (
    STATUS,
    epoch,
    event_view,
    paginate,
    status_view,
    summary_of,
)

router = APIRouter(prefix="/api", tags=["executions"], responses=error_responses())


class ExecuteRequest(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, json_schema_extra=BY_ID_OR_PATH)
    path: str | None = None
    catalog_id: str | int | None = None
    version: Version | None = None
    workload: dict[str, Any] = Field(default_factory=dict, alias="workload")
    payload: dict[str, Any] | None = None
    resource_kind: str | None = Field(
        None, pattern=r"^([Pp]laybook|PLAYBOOK|[Aa]gent|AGENT)$", description="playbook or agent"
    )
    parent_execution_id: str | int | None = None

    _named = model_validator(mode="after")(by_id_or_path)


class CancelRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    cascade: StrictBool = True
    reason: str = "User requested cancellation"


class SignalRequest(BaseModel):
    name: str = Field(min_length=1)
    data: Any = None


class RerunRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    workload: dict[str, Any] = Field(default_factory=dict)


class CleanupRequest(BaseModel):
    older_than_minutes: int = Field(default=5, ge=1)
    dry_run: StrictBool = False


def start(
    service: Service,
    entry: dict[str, Any],
    workload: dict[str, Any],
    parent_id: str | None,
) -> dict[str, Any]:
    if entry["kind"] not in EXECUTABLE or entry.get("program") is None:
        # the request is well formed; the entry it names cannot run
        raise ApiError(
            409,
            BAD_REQUEST,
            f"Catalog kind '{entry['kind']}' is not executable",
            "only playbooks (and agents) run",
        )
    limit = service.settings.limits.workload_bytes
    size = len(json.dumps(workload, default=str))
    if size > limit:
        raise ApiError(
            413,
            TOO_LARGE,
            f"the workload is {size} bytes of JSON, over the limit of {limit}",
            "pass large data by reference (a file, a table); `noetl-vm serve"
            " --max-workload-bytes N` raises the limit",
        )
    name = (entry["payload"].get("metadata") or {}).get("name") or entry["path"]
    execution_id = service.engine.start(entry["program"], str(name), workload, parent_id)
    service.catalog.record_origin(
        execution_id, entry["catalog_id"], entry["path"], entry["version"]
    )
    return {
        "execution_id": execution_id,
        "status": "started",
        "commands_generated": 1,
        "path": entry["path"],
        "version": entry["version"],
        "catalog_id": entry["catalog_id"],
    }


@router.post("/execute", response_model=Started)
def execute(body: ExecuteRequest, service: ServiceDep) -> dict[str, Any]:
    service = service
    kind = (body.resource_kind or "playbook").lower()
    if kind not in EXECUTABLE:
        raise bad_request(f"Catalog kind '{body.resource_kind}' is not executable", None, 422)
    if body.path is None and body.catalog_id is None:
        raise bad_request("path or catalog_id is required", None, 422)
    entry = find_entry(service, body.path, body.version, body.catalog_id)
    if entry is None:
        raise not_found(
            f"Executable catalog entry not found: {body.path or body.catalog_id}",
            "register the playbook first (POST /api/catalog/register)",
        )
    workload = {**(body.payload or {}), **body.workload}
    parent = None if body.parent_execution_id is None else str(body.parent_execution_id)
    return start(service, entry, workload, parent)


def record_of(service: Service, execution_id: str) -> dict[str, Any]:
    record = service.engine.execution(execution_id)
    if record is None:
        raise not_found(
            f"Execution {execution_id} not found", "GET /api/executions lists the executions"
        )
    return record


@router.get("/executions", response_model=list[ExecutionSummary])
def list_executions(
    service: ServiceDep,
    page: int = Query(1, ge=1, le=1_000_000),
    page_size: int = Query(100, ge=1, le=200),
    status: str | None = Query(None, description="RUNNING, COMPLETED, FAILED or CANCELLED"),
    path: str | None = Query(None, description="only executions of this playbook path"),
    q: str | None = Query(
        None, max_length=200, description="text in the id, path, playbook or error (any case)"
    ),
    since: float | None = Query(None, ge=0, le=1e11, description="started at or after (epoch s)"),
    until: float | None = Query(None, ge=0, le=1e11, description="started before (epoch s)"),
) -> list[dict[str, Any]]:
    origins = service.catalog.origins()
    rows = list(reversed(service.engine.executions()))
    wanted = status.upper() if status else None
    out = []
    for record in rows:
        view = summary_of(record, origins.get(str(record["execution_id"])))
        if wanted and view["status"] != wanted:
            continue
        if path and view["path"] != path:
            continue
        if not _matches(view, record, q, since, until):
            continue
        out.append(view)
    return out[(page - 1) * page_size : page * page_size]


def _matches(
    view: dict[str, Any],
    record: dict[str, Any],
    q: str | None,
    since: float | None,
    until: float | None,
) -> bool:
    """The console's search: text in the id, path, playbook or error; a start time range."""
    if q:
        text = q.lower()
        fields = (view["execution_id"], view["path"], view["playbook"], view["error"])
        if not any(text in str(f).lower() for f in fields if f):
            return False
    if since is not None or until is not None:
        started = epoch(record.get("created_at"))
        if started is None or (since is not None and started < since):
            return False
        if until is not None and started >= until:
            return False
    return True


def _events(
    service: Service,
    execution_id: str,
    page: int,
    page_size: int,
    since_event_id: int | None,
    event_type: str | None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    origin = service.catalog.origin(execution_id)
    records = service.engine.events(execution_id, since_event_id or 0)
    views = [event_view(e, origin) for e in reversed(records)]
    if event_type:
        views = [v for v in views if v["event_type"] == event_type]
    return paginate(views, page, page_size)


@router.get("/executions/{execution_id:digits}", response_model=ExecutionDetail)
def execution_detail(
    execution_id: ExecutionId,
    service: ServiceDep,
    page: int = Query(1, ge=1, le=1_000_000),
    page_size: int = Query(100, ge=1, le=500),
    since_event_id: int | None = Query(None, ge=0, le=2**62),
    event_type: str | None = None,
    include_events: bool = True,
) -> dict[str, Any]:
    service = service
    record = record_of(service, execution_id)
    out = summary_of(record, service.catalog.origin(execution_id))
    out["summary"] = record.get("summary")
    if include_events:
        events, pages = _events(service, execution_id, page, page_size, since_event_id, event_type)
        out.update(events=events, pagination=pages)
    out["events_included"] = include_events
    out["events_endpoint"] = f"/api/executions/{execution_id}/events"
    return out


@router.get("/executions/{execution_id:digits}/status", response_model=StatusView)
def execution_status(execution_id: ExecutionId, service: ServiceDep) -> dict[str, Any]:
    service = service
    record = record_of(service, execution_id)
    kept = service.progress
    if record.get("summary"):
        with service.progress_lock:
            kept.pop(execution_id, None)
        ended = StepProgress()
        ended.feed(service.engine.events(execution_id))
        return status_view(record, ended)
    with service.progress_lock:
        progress = kept.pop(execution_id, None) or StepProgress()
        kept[execution_id] = progress  # most recent last
        while len(kept) > PROGRESS_KEPT:
            kept.pop(next(iter(kept)))
    progress.feed(service.engine.events(execution_id, progress.after))
    return status_view(record, progress)


@router.get(
    "/executions/{execution_id:digits}/events",
    response_model=EventsPage,
    responses={200: {"content": {"text/event-stream": {}}}},
)
def execution_events(
    execution_id: ExecutionId,
    request: Request,
    service: ServiceDep,
    page: int = Query(1, ge=1, le=1_000_000),
    page_size: int = Query(100, ge=1, le=500),
    since_event_id: int | None = Query(None, ge=0, le=2**62),
    event_type: str | None = None,
    stream: bool = Query(False, description="a live server-sent event stream"),
) -> Any:
    """The events, newest first; with `Accept: text/event-stream` (or `stream=true`) a live
    stream instead: each event oldest first as `event: <type>` / `data: <json>`, `id:` its
    event_id (a reconnect sends `Last-Event-ID` and gets the rest), and a final `end` event."""
    record = record_of(service, execution_id)
    if stream or "text/event-stream" in request.headers.get("accept", ""):
        last = request.headers.get("last-event-id", "")
        after = since_event_id or (int(last) if last.isascii() and last.isdigit() else 0)
        return StreamingResponse(
            _stream(service, execution_id, after, request),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    events, pages = _events(service, execution_id, page, page_size, since_event_id, event_type)
    return {
        "execution_id": execution_id,
        "path": summary_of(record, service.catalog.origin(execution_id))["path"],
        "status": STATUS.get(record["status"], record["status"]),
        "events": events,
        "pagination": pages,
    }


async def _stream(
    service: Service, execution_id: str, after: int, request: Request
) -> AsyncIterator[str]:
    origin = service.catalog.origin(execution_id)
    last_beat = time.monotonic()
    while True:
        records = await asyncio.to_thread(service.engine.events, execution_id, after)
        if records:  # one chunk per read: a long log is not sent one write per event
            after = int(records[-1]["seq"])
            yield "".join(_sse(event, origin) for event in records)
        if not records:
            record = await asyncio.to_thread(service.engine.execution, execution_id)
            if record is not None and record["status"] != "running":
                # the last events may have been committed with the status: read once more
                rest = await asyncio.to_thread(service.engine.events, execution_id, after)
                if rest:
                    yield "".join(_sse(event, origin) for event in rest)
                status = STATUS.get(record["status"], record["status"])
                yield f"event: end\ndata: {json.dumps({'status': status})}\n\n"
                return
            if await request.is_disconnected():
                return
            if time.monotonic() - last_beat > 15:
                last_beat = time.monotonic()
                yield ": keep-alive\n\n"
            await asyncio.sleep(0.1)


def _sse(event: dict[str, Any], origin: dict[str, Any] | None) -> str:
    view = event_view(event, origin)
    data = json.dumps(view, default=str)
    return f"id: {event['seq']}\nevent: {view['event_type']}\ndata: {data}\n\n"


@router.post("/executions/{execution_id:digits}/cancel", response_model=Cancelled)
def cancel(
    execution_id: ExecutionId, service: ServiceDep, body: CancelRequest | None = None
) -> dict[str, Any]:
    service = service
    body = body or CancelRequest()
    record = record_of(service, execution_id)
    if record["status"] != "running":
        status = STATUS.get(record["status"], record["status"])
        return {
            "status": "already_completed",
            "execution_id": execution_id,
            "cancelled_executions": [],
            "message": f"Execution {execution_id} is already {status}",
        }
    targets = [execution_id]
    if body.cascade:
        targets += [
            str(r["execution_id"])
            for r in service.engine.executions()
            if r.get("parent_id") == execution_id and r["status"] == "running"
        ]
    for target in targets:
        service.engine.cancel(target, body.reason)
    return {
        "status": "cancelled",
        "execution_id": execution_id,
        "cancelled_executions": targets,
        "message": f"Cancelled {len(targets)} execution(s)",
        "reason": body.reason,
    }


@router.post("/executions/{execution_id:digits}/signal", response_model=Signalled)
def signal(execution_id: ExecutionId, body: SignalRequest, service: ServiceDep) -> dict[str, Any]:
    service = service
    record = record_of(service, execution_id)
    if record["status"] != "running":
        raise ApiError(
            409,
            "NOE872",
            f"Execution {execution_id} already ended ({record['status']})",
            "signals reach running executions only",
        )
    request_id = service.engine.signal(execution_id, body.name, body.data)
    return {
        "status": "sent",
        "execution_id": execution_id,
        "name": body.name,
        "request": request_id,
    }


@router.post("/executions/{execution_id:digits}/rerun", response_model=Started)
def rerun(
    execution_id: ExecutionId, service: ServiceDep, body: RerunRequest | None = None
) -> dict[str, Any]:
    service = service
    record = record_of(service, execution_id)
    origin = service.catalog.origin(execution_id)
    if origin is None or origin.get("catalog_id") is None:
        raise ApiError(
            409,
            BAD_REQUEST,
            f"Execution {execution_id} was not started from the catalog",
            "start it again with POST /api/execute",
        )
    entry = service.catalog.entry(catalog_id=origin["catalog_id"])
    if entry is None:
        raise not_found("Catalog entry not found")
    workload = {**(record.get("workload") or {}), **((body.workload if body else None) or {})}
    return start(service, entry, workload, None)


@router.post("/executions/cleanup", response_model=CleanedUp)
def cleanup(body: CleanupRequest, service: ServiceDep) -> dict[str, Any]:
    service = service
    cutoff = time.time() - body.older_than_minutes * 60
    stale = [
        str(r["execution_id"])
        for r in service.engine.executions()
        if r["status"] == "running" and (epoch(r.get("created_at")) or 0) < cutoff
    ]
    if not body.dry_run:
        for execution_id in stale:
            service.engine.cancel(execution_id, "cleanup of stale executions")
    verb = "would cancel" if body.dry_run else "cancelled"
    return {
        "cancelled_count": len(stale),
        "execution_ids": stale,
        "message": f"{verb} {len(stale)} execution(s) running for more than"
        f" {body.older_than_minutes} minute(s)",
    }
