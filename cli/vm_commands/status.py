"""Show the executions recorded in the event store: a filtered list, or one in detail.

    noetl-vm status [--status S] [--playbook NAME] [--since 10m|2h|1d|2026-01-31] [--limit N]
    noetl-vm status EXECUTION_ID [--json]

The list shows the newest executions last (`--limit N`: only the newest N); `--json` prints a
list of objects. One execution (by its id or a unique prefix) shows its status, times, each
step's status and runs, and its error; `--json` prints one object.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import time
from typing import Any

from noetlc.cli.common import UsageError
from noetlc.cli.vm_commands.history import add_db, open_existing, resolve_id
from noetlc.cli.vm_commands.liveness import INTERRUPTED, interrupted_owner, resume_hint

STATUSES = ("running", "completed", "failed", "cancelled")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "execution_id", metavar="ID", nargs="?", help="one execution (its id or a unique prefix)"
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--status", choices=STATUSES, help="only executions with this status")
    p.add_argument("--playbook", metavar="NAME", help="only executions of this playbook")
    p.add_argument(
        "--since",
        metavar="WHEN",
        type=since_value,
        help="only executions started since WHEN: 30s, 10m, 2h, 1d or a date (2026-01-31)",
    )
    p.add_argument("--limit", type=positive, metavar="N", help="only the newest N")
    add_db(p)


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def since_value(text: str) -> float:
    """A duration back from now (`10m`) or a date/time (ISO 8601), as a Unix time."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", text.strip())
    if m:
        return time.time() - float(m.group(1)) * _UNITS[m.group(2)]
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a duration (30s, 10m, 2h, 1d) nor a date (2026-01-31)"
        ) from None
    return when.timestamp()


def unix(value: Any) -> float | None:
    """A stored time (Unix seconds or a datetime) as Unix seconds."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.timestamp()
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def clock(value: Any) -> str:
    t = unix(value)
    if t is None:
        return "-"
    return dt.datetime.fromtimestamp(t).isoformat(sep=" ", timespec="seconds")


def duration(record: dict[str, Any]) -> str:
    start, end = unix(record.get("created_at")), unix(record.get("finished_at"))
    if start is None:
        return "-"
    seconds = (end if end is not None else time.time()) - start
    text = f"{seconds:.2f}s" if seconds < 60 else f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return text if end is not None else f"{text} so far"


def select(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.status:
        rows = [r for r in rows if r["status"] == args.status]
    if args.playbook:
        rows = [r for r in rows if r["playbook"] == args.playbook]
    if args.since is not None:
        rows = [r for r in rows if (unix(r.get("created_at")) or 0.0) >= args.since]
    if args.limit:
        rows = rows[-args.limit :]
    return rows


def public(record: dict[str, Any]) -> dict[str, Any]:
    """A record as JSON shows it: everything but the program bytes."""
    return {k: v for k, v in record.items() if k != "program"}


def detail(record: dict[str, Any]) -> list[str]:
    summary = record.get("summary") or {}
    lines = [
        f"execution {record['execution_id']}",
        f"  playbook  {record['playbook']}",
        f"  status    {record['status']}",
        f"  started   {clock(record.get('created_at'))}",
        f"  finished  {clock(record.get('finished_at'))}  ({duration(record)})",
    ]
    if record.get("parent_id"):
        lines.append(f"  parent    {record['parent_id']}")
    if summary.get("events") is not None:
        lines.append(f"  events    {summary['events']}")
    steps = summary.get("steps") or {}
    if steps:
        lines.append("  steps")
        for name, step in steps.items():
            lines.append(f"    {step.get('status') or '-':<9} {name} (runs {step.get('runs', 0)})")
    error = summary.get("error")
    if error:
        where = f" (step {error['step']})" if error.get("step") else ""
        kind = error.get("type")
        shown = f"{kind}: " if kind and kind != "Cancelled" else ""
        lines.append(f"  error     [{error.get('code')}] {shown}{error.get('message')}{where}")
        yaml = error.get("yaml")
        if isinstance(yaml, dict) and yaml.get("line"):  # the line that raised
            at = f"{yaml.get('file') or ''}:{yaml['line']}:{yaml.get('column') or 1}"
            lines.append(f"  at        {at}")
    return lines


def run(args: argparse.Namespace) -> int:
    store = open_existing(args.db)
    try:
        if args.execution_id:
            if args.status or args.playbook or args.since is not None or args.limit:
                raise UsageError(
                    "NOE800", "--status, --playbook, --since and --limit filter the list only"
                )
            record = resolve_id(store, args.execution_id, args.db)
            dead = interrupted_owner(args.db, record)
            if args.json:
                print(json.dumps(_with_owner(public(record), dead), default=str))
            else:
                lines = detail(record)
                if dead is not None:
                    lines[2] = f"  status    {INTERRUPTED} (recorded as running; pid"
                    lines[2] += f" {dead['pid']} on {dead['host']} is gone)"
                    lines.append(f"  hint: {resume_hint(record['execution_id'])}")
                print("\n".join(lines))
            return 0
        rows = select(store.executions(), args)
    finally:
        store.close()
    owners = {r["execution_id"]: interrupted_owner(args.db, r) for r in rows}
    if args.json:
        print(
            json.dumps(
                [_with_owner(public(r), owners[r["execution_id"]]) for r in rows], default=str
            )
        )
    else:
        for r in rows:
            shown = INTERRUPTED if owners[r["execution_id"]] else r["status"]
            print(
                f"{r['execution_id']}  {shown:<11}  {clock(r.get('created_at'))}"
                f"  {duration(r):>14}  {r['playbook']}"
            )
        if any(owners.values()):
            print(
                "interrupted: the process that ran it is gone; `noetl-vm resume ID` finishes it",
                file=sys.stderr,
            )
    return 0


def _with_owner(record: dict[str, Any], dead: dict[str, Any] | None) -> dict[str, Any]:
    """JSON keeps the stored status; an interrupted execution says so beside it."""
    if dead is not None:
        record["interrupted"] = True
        record["dead_owner"] = dead
    return record
