"""Print an execution's events in order: time, source, name, where, and the outcome (an
error's type and message, a retry's attempt and delay, a result's status).

    noetl-vm events EXECUTION_ID [--follow] [--json] [--db URL]

EXECUTION_ID may be a unique prefix of the id. `--json` prints one JSON object per line;
`--follow` keeps printing new events until the execution ends.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from typing import Any

from noetlc.cli.vm_commands.history import add_db, find_execution, open_existing
from noetlc.ir.events import EventName


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("execution_id", metavar="ID", help="the execution (its id or a unique prefix)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--follow", "-f", action="store_true", help="wait for new events")
    add_db(p)


def _time(ts: Any) -> str:
    if isinstance(ts, dt.datetime):
        when = ts
    else:
        try:
            when = dt.datetime.fromtimestamp(float(ts))
        except (TypeError, ValueError):
            return "-" * 12
    return when.strftime("%H:%M:%S.%f")[:-3]


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def outcome(e: dict[str, Any]) -> str:
    """What happened, in a few words: an error, a retry, a status, a status code."""
    payload = e.get("payload") or {}
    if not isinstance(payload, dict):
        return ""
    parts: list[str] = []
    inner = payload.get("outcome")
    if isinstance(inner, dict):  # a task's outcome: its error and its result's status code
        payload = {**payload, **{k: v for k, v in inner.items() if k != "status"}}
    error = payload.get("error")
    if isinstance(error, dict):
        kind = error.get("type") or error.get("code") or "error"
        parts.append(f"{kind}: {_short(error.get('message', ''))}")
    elif error:
        parts.append(f"error: {_short(error)}")
    if e.get("name") == EventName.TASK_RETRY.value:
        parts.append(f"attempt {payload.get('attempt')} failed, retry in {payload.get('delay')}s")
    for key in ("status", "status_code", "reason"):
        if key in payload and payload[key] is not None and not isinstance(payload[key], dict):
            parts.append(f"{key} {payload[key]}")
    result = payload.get("result")
    if isinstance(result, dict):
        for key in ("status", "status_code"):
            if key in result and not isinstance(result[key], (dict, list)):
                parts.append(f"{key} {result[key]}")
    return "; ".join(parts)


def line(e: dict[str, Any]) -> str:
    where = e.get("step") or "-"
    if e.get("iteration") is not None:
        where += f"[{e['iteration']}]"
    payload = e.get("payload") or {}
    task = payload.get("task") if isinstance(payload, dict) else None
    if task:
        where += f".{task}"
    if e.get("attempt"):
        where += f" #{e['attempt']}"
    text = (
        f"{e['seq']:>5}  {_time(e.get('ts'))}  {e.get('source') or '-':<6} {e['name']:<24} {where}"
    )
    said = outcome(e)
    return f"{text}  {said}" if said else text


def run(args: argparse.Namespace) -> int:
    store = open_existing(args.db)
    try:
        execution_id = find_execution(store, args.execution_id, args.db)["execution_id"]
        seq = 0
        while True:
            for e in store.read(execution_id, after_seq=seq):
                seq = e["seq"]
                print(json.dumps(e, default=str) if args.json else line(e), flush=True)
            if not args.follow:
                break
            record = store.execution(execution_id)
            if record is not None and record["status"] != "running":
                for e in store.read(execution_id, after_seq=seq):
                    print(json.dumps(e, default=str) if args.json else line(e), flush=True)
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        return 0
    finally:
        store.close()
    return 0
