"""Executions and events in the shapes NoETL clients read.

An execution's `status` is RUNNING, COMPLETED, FAILED or CANCELLED. The status view follows the
NoETL client's display rules: `completed` is true once the run ended (so a failed run shows
FAILED: `completed` and `failed` both true); `completed_steps` lists the steps that finished.
Events are the store's records with the NoETL names beside ours: `event_id` is the store's
per-execution `seq` (an integer), `event_type` our event name, `node_name` the step.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from noetlc.ir.events import EventName
from noetlc.service.progress import StepProgress

STATUS = {
    "running": "RUNNING",
    "completed": "COMPLETED",
    "failed": "FAILED",
    "cancelled": "CANCELLED",
}
_STEP_DONE = EventName.STEP_DONE.value
_STEP_FAILED = EventName.STEP_FAILED.value
_EVENT_STATUS = {
    _STEP_DONE: "COMPLETED",
    _STEP_FAILED: "FAILED",
    EventName.TASK_DONE.value: "COMPLETED",
    EventName.WORKFLOW_FINISHED.value: "COMPLETED",
    EventName.EXECUTION_FAILED.value: "FAILED",
    EventName.EXECUTION_CANCELLED.value: "CANCELLED",
    EventName.LOOP_ITERATION_FAILED.value: "FAILED",
    EventName.LOOP_DONE.value: "COMPLETED",
    EventName.LOOP_ITERATION_DONE.value: "COMPLETED",
}


def epoch(value: Any) -> float | None:
    """A store time (epoch seconds, or a datetime from PostgreSQL) as epoch seconds."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.timestamp()
    return float(value)


def iso(value: Any) -> str | None:
    seconds = epoch(value)
    if seconds is None:
        return None
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat()


def human(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    if seconds < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{round(seconds)}s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {rest}s" if rest else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m"


def error_text(error: Any) -> str | None:
    """`error[CODE]: Type: message (step S, task T, at FILE:LINE:COLUMN)`: the line is the
    YAML line that raised (a python error's code line, a template's position)."""
    if not error:
        return None
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        kind = error.get("type")
        if kind and kind != "Cancelled" and not str(message).startswith(f"{kind}:"):
            message = f"{kind}: {message}"
        where = []
        if error.get("step"):
            where.append(f"step {error['step']}")
        if error.get("task"):
            where.append(f"task {error['task']}")
        yaml = error.get("yaml")
        if isinstance(yaml, dict) and yaml.get("line"):
            name = str(yaml.get("file") or "").rsplit("/", 1)[-1]
            where.append(f"at {name}:{yaml['line']}:{yaml.get('column') or 1}")
        if isinstance(error.get("position"), int):
            where.append(f"character {error['position']} of the statement")
        suffix = f" ({', '.join(where)})" if where else ""
        body = error.get("body")
        if isinstance(body, str) and body:  # an HTTP error answer's first words
            suffix += f": {body[:200]}"
        return f"error[{code}]: {message}{suffix}" if code else f"{message}{suffix}"
    return str(error)


def times(record: dict[str, Any]) -> dict[str, Any]:
    start, end = epoch(record.get("created_at")), epoch(record.get("finished_at"))
    if record.get("status") == "running":
        end = None
    duration = None if start is None else (end if end is not None else _now()) - start
    return {
        "start_time": iso(start),
        "end_time": iso(end),
        "duration_seconds": None if duration is None else round(duration, 6),
        "duration_human": human(duration),
    }


def _now() -> float:
    import time

    return time.time()


def summary_of(
    record: dict[str, Any], origin: dict[str, Any] | None, redact: Any = None
) -> dict[str, Any]:
    """The list/detail top-level fields of one execution."""
    status = STATUS.get(record.get("status") or "", str(record.get("status")).upper())
    summary = record.get("summary") or {}
    origin = origin or {}
    out = {
        "execution_id": str(record["execution_id"]),
        "catalog_id": origin.get("catalog_id"),
        "path": origin.get("path") or record.get("playbook"),
        "playbook": record.get("playbook"),
        "version": origin.get("version"),
        "status": status,
        **times(record),
        "progress": 0 if status == "RUNNING" else 100,
        "result": summary.get("result"),
        "error": error_text(summary.get("error")),
        "parent_execution_id": record.get("parent_id"),
    }
    return redact(out) if redact is not None else out


def event_view(event: dict[str, Any], origin: dict[str, Any] | None) -> dict[str, Any]:
    payload = event.get("payload") or {}
    name = event["name"]
    if name.endswith(".started"):
        status = "STARTED"
    else:
        status = _EVENT_STATUS.get(name, "INFO")
    when = iso(event.get("ts"))
    return {
        "execution_id": str(event["execution_id"]),
        "event_id": int(event["seq"]),
        "event_type": name,
        "node_id": event.get("step"),
        "node_name": event.get("step"),
        "status": status,
        "created_at": when,
        "timestamp": when,
        "context": payload,
        "result": payload.get("result") if isinstance(payload, dict) else None,
        "error": error_text(payload.get("error")) if isinstance(payload, dict) else None,
        "catalog_id": (origin or {}).get("catalog_id"),
        "parent_execution_id": None,
        "parent_event_id": None,
        "duration": None,
        "iteration": event.get("iteration"),
        "attempt": event.get("attempt"),
        "source": event.get("source"),
        "step_run_id": event.get("step_run_id"),
    }


def status_view(record: dict[str, Any], progress: StepProgress | None = None) -> dict[str, Any]:
    """`GET /api/executions/{id}/status`: NoETL's fields, then what runs now (running and
    scheduled steps, each step's state and attempts, loop progress: service/progress.py)."""
    status = record.get("status") or "running"
    summary = record.get("summary") or {}
    completed_steps: list[str] = []
    current: str | None = None
    if summary.get("steps"):
        completed_steps = [n for n, s in summary["steps"].items() if s.get("status") == "done"]
    elif progress is not None:
        completed_steps = list(progress.completed)
        running = progress.in_state("running")
        current = running[0] if running else (progress.current or progress.last_step)
    ended = status != "running"
    out: dict[str, Any] = {
        "execution_id": str(record["execution_id"]),
        "status": STATUS.get(status, status.upper()),
        "current_step": current,
        "completed_steps": completed_steps,
        "failed": status == "failed",
        "completed": ended,
        "completion_inferred": False,
        "variables": {},
        **times(record),
    }
    if progress is not None:
        out.update(progress.view(ended, status == "cancelled"))
    if status == "failed":
        error = summary.get("error")
        out["error"] = error_text(error) or "failed"
        if isinstance(error, dict):
            out["error_detail"] = error  # type, message, the YAML line, the traceback
    if status == "cancelled":
        out["cancelled"] = True
    return out


def paginate(items: list[Any], page: int, page_size: int) -> tuple[list[Any], dict[str, Any]]:
    total = len(items)
    pages = max(1, -(-total // page_size))
    chunk = items[(page - 1) * page_size : page * page_size]
    return chunk, {
        "page": page,
        "page_size": page_size,
        "total_events": total,
        "total_pages": pages,
        "has_next": page < pages,
        "has_prev": page > 1,
    }
