"""The reply models of the routes whose shapes come from service/views.py (the NoETL
client's field names): each names the fields a client relies on and their types, and allows
the rest (`extra="allow"`), so the OpenAPI schema states what every reply has."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Health(BaseModel):
    status: str


class Started(Open):
    execution_id: str
    status: str
    commands_generated: int
    path: str
    version: int
    catalog_id: str


class ExecutionSummary(Open):
    execution_id: str
    catalog_id: str | None = None
    path: str | None = None
    playbook: str | None = None
    version: int | None = None
    status: str
    start_time: str | None = None
    end_time: str | None = None
    duration_seconds: float | None = None
    duration_human: str | None = None
    progress: int
    result: Any = None
    error: str | None = None
    parent_execution_id: str | None = None


class EventView(Open):
    execution_id: str
    event_id: int
    event_type: str
    node_name: str | None = None
    status: str
    created_at: str | None = None


class EventPages(Open):
    page: int
    page_size: int
    total_events: int
    total_pages: int
    has_next: bool
    has_prev: bool


class ExecutionDetail(ExecutionSummary):
    summary: Any = None
    events: list[EventView] | None = None
    pagination: EventPages | None = None
    events_included: bool
    events_endpoint: str


class StepState(Open):
    state: str
    runs: int
    attempts: int


class LoopProgress(Open):
    total: int
    done: int
    failed: int
    in_flight: int
    running: int


class StatusView(Open):
    execution_id: str
    status: str
    current_step: str | None = None
    completed_steps: list[str]
    failed: bool
    completed: bool
    start_time: str | None = None
    end_time: str | None = None
    duration_seconds: float | None = None
    duration_human: str | None = None
    # what runs now (service/progress.py)
    running_steps: list[str] = Field(default_factory=list)
    scheduled_steps: list[str] = Field(default_factory=list)
    steps: dict[str, StepState] = Field(default_factory=dict)
    loops: dict[str, LoopProgress] = Field(default_factory=dict)
    error: str | None = None
    error_detail: dict[str, Any] | None = None
    cancelled: bool | None = None


class EventsPage(Open):
    execution_id: str
    path: str | None = None
    status: str
    events: list[EventView]
    pagination: EventPages


class Cancelled(Open):
    status: str
    execution_id: str
    cancelled_executions: list[str]
    message: str


class Signalled(Open):
    status: str
    execution_id: str
    name: str
    request: int


class CleanedUp(Open):
    cancelled_count: int
    execution_ids: list[str]
    message: str


class Registered(Open):
    status: str
    message: str
    path: str
    version: int
    catalog_id: str
    kind: str
    created: bool
    findings: list[dict[str, Any]]


class BatchItem(Open):
    index: int
    status: str
    path: str | None = None
    version: int | None = None
    error: str | None = None


class BatchResult(Open):
    registered: int
    failed: int
    results: list[BatchItem]


class Entry(Open):
    catalog_id: str
    path: str
    version: int
    kind: str
    content: str
    payload: Any = None
    meta: dict[str, Any]
    created_at: str
    findings: list[dict[str, Any]] | None = None


class StepGraph(Open):
    name: str | None = None
    steps: list[dict[str, Any]]
    edges: list[dict[str, Any]]


class Vars(Open):
    execution_id: int
    variables: dict[str, Any]
    count: int


class Var(Open):
    execution_id: int
    var_name: str
    value: Any = None


class VarsSet(Open):
    execution_id: int
    variables_set: int
    var_names: list[str]


class VarDeleted(Open):
    execution_id: int
    var_name: str
    deleted: bool


class VarsDeleted(Open):
    execution_id: int
    deleted_count: int


class Rendered(Open):
    status: str
    rendered: Any = None
    context_keys: list[str]


class LogRow(Open):
    seq: int
    ts: float | None = None
    step: str | None = None
    iteration: int | None = None
    task: str | None = None
    attempt: int | None = None
    stream: str | None = None
    text: str


class LogsPage(Open):
    execution_id: str
    status: str
    logs: list[LogRow]
    next_after: int
    more: bool
