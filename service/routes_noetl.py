"""The rest of NoETL's client: `noetl db init|validate`, `noetl ehdb query ...` and `noetl
query SQL`, on our store.

* `POST /api/db/init` — the schema upgrade (`noetl-vm db upgrade` for PostgreSQL; a SQLite
  store upgrades itself when opened): what was applied and the version.
* `GET /api/db/validate` — the schema's status (`noetl-vm db status`): `valid` true when it
  is current.
* `GET /api/ehdb/executions[?status=&path=&limit=&offset=]`,
  `GET /api/ehdb/executions/{id}`, `GET /api/ehdb/executions/{id}/events[?after=&limit=]`,
  `GET /api/ehdb/events`, `GET /api/ehdb/tiers/{tier}` — NoETL's read model of executions and
  events: ids, statuses, step names, counts and times; never results, errors or workloads
  (which may carry secrets).
* `POST /api/postgres/execute` (`noetl query`) — read-only SQL against the store
  (`sql_query.py`: what it refuses besides writes, and why); anything else is 400 NOE883.

All are behind the token like every other route.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter, Query
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from noetlc.service.deps import ExecutionId, ServiceDep
from noetlc.service.errors import bad_request, error_responses
from noetlc.service.sql_query import QUERY_ROWS, pg_query, sqlite_query
from noetlc.service.sql_query import refused as _refused
from noetlc.service.state import Service
from noetlc.service.views import summary_of

TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")

router = APIRouter(prefix="/api", tags=["noetl client"], responses=error_responses())


# ---------------------------------------------------------------------------------- db


class DbReply(BaseModel):
    model_config = ConfigDict(extra="allow")
    status: str
    message: str
    backend: str
    schema_name: str | None = Field(None, serialization_alias="schema")
    version: int
    valid: bool
    applied_now: list[str] = Field(default_factory=list)
    pending: list[str] = Field(default_factory=list)


def _schema(service: Service, upgrade: bool) -> DbReply:
    url = service.settings.db
    if service.engine.distributed:
        from noetlc.runtime.postgres.migrate import schema_status
        from noetlc.runtime.postgres.migrate import upgrade as run_upgrade

        applied = asyncio.run(run_upgrade(url)) if upgrade else []
        status = asyncio.run(schema_status(url))
        version = max((a.version for a in status.applied), default=0)
        pending = [f"{m.version:04d}_{m.name}" for m in status.pending]
        done = [f"{m.version:04d}_{m.name}" for m in applied]
        if upgrade:
            message = f"applied {', '.join(done)}" if done else "schema is current"
        else:
            message = "schema is current" if status.current else f"pending: {', '.join(pending)}"
        return DbReply(
            status="ok" if status.current else "error",
            message=message,
            backend="postgresql",
            schema_name=status.schema,
            version=version,
            valid=status.current,
            applied_now=done,
            pending=pending,
        )
    from noetlc.runtime.event_store import SCHEMA_VERSION

    store = service.engine.store
    db = getattr(store, "_db", None)
    version = int(db.execute("PRAGMA user_version").fetchone()[0]) if db is not None else 0
    valid = db is None or version >= SCHEMA_VERSION
    backend = "sqlite" if db is not None else "memory"
    return DbReply(
        status="ok" if valid else "error",
        message="schema is current (a SQLite store upgrades itself when opened)"
        if valid
        else f"schema version {version}, this release needs {SCHEMA_VERSION}",
        backend=backend,
        schema_name=None,
        version=version if db is not None else SCHEMA_VERSION,
        valid=valid,
    )


@router.post("/db/init", response_model=DbReply, tags=["db"])
def db_init(service: ServiceDep) -> DbReply:
    """`noetl db init`: apply pending schema migrations (idempotent)."""
    return _schema(service, upgrade=True)


@router.get("/db/validate", response_model=DbReply, tags=["db"])
def db_validate(service: ServiceDep) -> DbReply:
    """`noetl db validate`: is the store's schema current?"""
    return _schema(service, upgrade=False)


# ---------------------------------------------------------------------------------- ehdb


class EhdbExecution(BaseModel):
    execution_id: str
    catalog_id: str | None = None
    path: str | None = None
    status: str
    terminal: bool
    current_node: str | None = None
    parent_execution_id: str | None = None
    event_count: int | None = None
    events: int | None = None  # the client's table column
    started_at: str | None = None
    completed_at: str | None = None


class EhdbExecutions(BaseModel):
    action: str = "ehdb.executions.list"
    tier: str = "projection"
    limit: int
    offset: int
    returned: int
    executions: list[EhdbExecution]


class EhdbState(BaseModel):
    action: str = "ehdb.execution.state"
    tier: str = "projection"
    execution_id: str
    exists: bool
    state: EhdbExecution | None = None


class EhdbEvent(BaseModel):
    event_id: str
    execution_id: str
    event_type: str
    node_name: str | None = None
    status: str | None = None
    created_at: str | None = None


class EhdbEvents(BaseModel):
    action: str
    tier: str
    execution_id: str | None = None
    exists: bool | None = None
    limit: int
    returned: int
    next_cursor: str | None = None
    events: list[EhdbEvent]


def _state(service: Service, record: dict[str, Any], full: bool) -> EhdbExecution:
    execution_id = str(record["execution_id"])
    view = summary_of(record, service.catalog.origin(execution_id))
    status = view["status"]
    count: int | None = None
    current: str | None = None
    if full:
        events = service.engine.events(execution_id)
        count = len(events)
        current = next((e.get("step") for e in reversed(events) if e.get("step")), None)
    return EhdbExecution(
        execution_id=execution_id,
        catalog_id=None if view.get("catalog_id") is None else str(view["catalog_id"]),
        path=view.get("path"),
        status=status,
        terminal=status in TERMINAL,
        current_node=current,
        parent_execution_id=None
        if record.get("parent_id") is None
        else str(record.get("parent_id")),
        event_count=count,
        events=count,
        started_at=view.get("start_time"),
        completed_at=view.get("end_time"),
    )


def _limit(limit: int | None, default: int) -> int:
    return max(1, min(QUERY_ROWS, default if limit is None else limit))


@router.get("/ehdb/executions", response_model=EhdbExecutions, tags=["ehdb"])
def ehdb_executions(
    service: ServiceDep,
    status: str | None = Query(None, description="RUNNING, COMPLETED, FAILED or CANCELLED"),
    path: str | None = None,
    limit: int | None = Query(None, ge=1, le=QUERY_ROWS),
    offset: int = Query(0, ge=0, le=1_000_000),
) -> EhdbExecutions:
    """Executions, newest first (NoETL's read model: no results, errors or workloads)."""
    size = _limit(limit, 50)
    wanted = status.upper() if status else None
    rows = []
    for record in reversed(service.engine.executions()):
        state = _state(service, record, full=False)
        if (wanted and state.status != wanted) or (path and state.path != path):
            continue
        rows.append(state)
    page = rows[offset : offset + size]
    return EhdbExecutions(limit=size, offset=offset, returned=len(page), executions=page)


@router.get("/ehdb/executions/{execution_id}", response_model=EhdbState, tags=["ehdb"])
def ehdb_execution(execution_id: ExecutionId, service: ServiceDep) -> EhdbState:
    """One execution's state; `exists: false` (not 404) for an unknown id, as NoETL answers."""
    record = service.engine.execution(execution_id) if execution_id.isdigit() else None
    if record is None:
        return EhdbState(execution_id=execution_id, exists=False)
    return EhdbState(
        execution_id=execution_id, exists=True, state=_state(service, record, full=True)
    )


def _events(service: Service, execution_id: str, after: int | None, size: int) -> list[EhdbEvent]:
    from noetlc.service.views import event_view

    origin = service.catalog.origin(execution_id)
    out = []
    for event in service.engine.events(execution_id, after or 0)[:size]:
        view = event_view(event, origin)
        out.append(
            EhdbEvent(
                event_id=str(view["event_id"]),
                execution_id=execution_id,
                event_type=str(view["event_type"]),
                node_name=view.get("node_name"),
                status=view.get("status"),
                created_at=view.get("created_at"),
            )
        )
    return out


@router.get("/ehdb/executions/{execution_id}/events", response_model=EhdbEvents, tags=["ehdb"])
def ehdb_execution_events(
    execution_id: ExecutionId,
    service: ServiceDep,
    after: int | None = Query(None, ge=0, le=2**62, description="events after this event_id"),
    limit: int | None = Query(None, ge=1, le=QUERY_ROWS),
) -> EhdbEvents:
    """One execution's events, oldest first, from `after` on (ids, types, steps, times)."""
    size = _limit(limit, 100)
    known = execution_id.isdigit() and service.engine.execution(execution_id) is not None
    events = _events(service, execution_id, after, size) if known else []
    return EhdbEvents(
        action="ehdb.execution.events",
        tier="projection",
        execution_id=execution_id,
        exists=bool(events),
        limit=size,
        returned=len(events),
        next_cursor=events[-1].event_id if len(events) == size else None,
        events=events,
    )


@router.get("/ehdb/tiers/{tier}", response_model=EhdbEvents, tags=["ehdb"])
def ehdb_tier(
    tier: Literal["eventlog"],
    service: ServiceDep,
    execution: str | None = Query(None, description="one execution's log"),
    execution_id: str | None = None,
    after: int | None = Query(None, ge=0, le=2**62),
    limit: int | None = Query(None, ge=1, le=QUERY_ROWS),
) -> EhdbEvents:
    """The event log (`eventlog`): one execution's, or the newest executions' events. Our
    store has no kv, object or vector tiers: 400."""
    if tier.lower() != "eventlog":
        raise bad_request(
            f"this service has no {tier!r} tier",
            "noetl-vm serve keeps one tier: eventlog (the event log of its store)",
        )
    size = _limit(limit, 100)
    which = execution or execution_id
    if which:
        events = _events(service, which, after, size) if which.isdigit() else []
    else:
        events = []
        for record in reversed(service.engine.executions()):
            events += _events(service, str(record["execution_id"]), None, size - len(events))
            if len(events) >= size:
                break
    return EhdbEvents(
        action="ehdb.tier.query",
        tier="eventlog",
        execution_id=which,
        limit=size,
        returned=len(events),
        events=events,
    )


# ---------------------------------------------------------------------------------- query


class QueryRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        json_schema_extra={
            "anyOf": [
                {"required": ["query"], "properties": {"query": {"type": "string"}}},
                {"required": ["query_base64"], "properties": {"query_base64": {"type": "string"}}},
            ]
        },
    )
    query: str | None = Field(None, pattern=r"\S", description="one read-only SQL statement")
    query_base64: str | None = Field(
        None, pattern=r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
    )

    @model_validator(mode="after")
    def _one_query(self) -> QueryRequest:
        if self.query is None and self.query_base64 is None:
            raise ValueError("query (or query_base64) is required")
        return self

    db_schema: str | None = Field(
        None, validation_alias=AliasChoices("schema", "db_schema"), description="search_path"
    )


class QueryReply(BaseModel):
    """NoETL's shape: `result` is a list of rows, each a list of values (the client's table
    numbers the columns); `columns` names them."""

    status: str
    result: list[list[Any]]
    columns: list[str]
    row_count: int
    truncated: bool


def _sql_of(body: QueryRequest) -> str:
    text = body.query
    if not text and body.query_base64:
        import base64
        import binascii

        try:
            text = base64.b64decode(body.query_base64, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise _refused("query_base64 is not base64 of UTF-8 text") from None
    if not text or not text.strip():
        raise _refused("the query is blank")
    return text.strip()


@router.post("/postgres/execute", response_model=QueryReply, tags=["query"])
def execute_query(body: QueryRequest, service: ServiceDep) -> QueryReply:
    """`noetl query SQL`: read-only SQL against this service's store (its own tables; the
    credential values in it are encrypted)."""
    from noetlc.stdlib_tools.envelope import jsonable

    sql = _sql_of(body)
    if service.engine.distributed:
        names, rows, cut = asyncio.run(pg_query(service.settings.db, sql, body.db_schema))
    else:
        path = getattr(service.engine.store, "path", None)
        if not path or path == ":memory:":
            raise _refused("a memory: store has no SQL database to query")
        names, rows, cut = sqlite_query(str(path), sql)
    result = [[jsonable(v) for v in row] for row in rows]
    return QueryReply(
        status="ok", result=result, columns=names, row_count=len(result), truncated=cut
    )
