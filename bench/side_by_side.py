"""Side by side: the NoETL client 5.3.2 driving NoETL's own server and `noetl-vm serve`.

The same five playbooks (generators.py, the dialect both servers accept), registered and run
through the same client binary (`noetl catalog register`, `noetl run PATH -r distributed
--json`, then `noetl status ID --json` every 10 ms): a run's wall time is from the start of
`noetl run` to the first status that says it ended. A status ends a run when it says
`completed`, not `completion_inferred` (NoETL's server guesses an end when no command is
pending for a moment, and it guesses early) and the playbook's last step is among the
completed steps; `failed` fails the benchmark.

CPU of a run: utime + stime (/proc/PID/stat) of the server's processes and their descendants
(task runners) and of the PostgreSQL backends serving them, sampled before and after the run.

NoETL's server is not started here: start it yourself (see NoETL's documentation) and name it

    NOETLC_BENCH_NOETL_SERVER=http://127.0.0.1:PORT   its base URL (without it: not measured)
    NOETLC_BENCH_NOETL_PIDS=PID,PID,...               its server, worker and NATS processes
    NOETLC_BENCH_NOETL_PG_DB=NAME                     its database on NOETLC_TEST_PG_DSN's server

The last two are optional: without them its CPU is not measured.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from noetlc.bench import generators
from noetlc.ir.events import EventName

SERVER_ENV = "NOETLC_BENCH_NOETL_SERVER"
PIDS_ENV = "NOETLC_BENCH_NOETL_PIDS"
PG_DB_ENV = "NOETLC_BENCH_NOETL_PG_DB"
CLOCK_TICK = os.sysconf("SC_CLK_TCK")
POLL_S = 0.01

# label -> playbook; the python chain and the sequential loop carry the target
PLAYBOOKS: dict[str, Callable[[], str]] = {
    "3 python steps": lambda: generators.python_chain(3),
    "100 python steps": lambda: generators.python_chain(100),
    "100 noop steps": lambda: generators.arcs_noop_chain(100),
    "100-iteration sequential python loop": lambda: generators.python_loop(100, "sequential"),
    "100-iteration parallel python loop": lambda: generators.python_loop(100, "parallel"),
}
TARGETED = ("100 python steps", "100-iteration sequential python loop")
TARGET_TIMES = 20  # NoETL ÷ ours, ours distributed


class RunFailed(Exception):
    pass


@dataclass
class Engine:
    """A server the client drives, and how to find the processes whose CPU is counted."""

    name: str
    url: str  # http://HOST:PORT
    pids: Callable[[], list[int]] = list  # its processes (descendants are added)
    backends: Callable[[], list[int]] | None = None  # its PostgreSQL backends
    cpu_measured: bool = True

    @property
    def host_port(self) -> tuple[str, int]:
        parts = urlsplit(self.url)
        return parts.hostname or "127.0.0.1", parts.port or 80


@dataclass
class Run:
    wall_s: float
    cpu_s: float | None
    polls: int  # `noetl status` calls until the end was seen
    premature: int  # statuses that said completed before the run had ended
    server_s: float | None  # the server's own duration_seconds, when it reports one
    execution_id: str = ""
    load: float = field(default_factory=lambda: round(os.getloadavg()[0], 2))


def noetl_from_env() -> tuple[Engine | None, str]:
    """NoETL's server from the environment, or None and the one-line reason."""
    url = os.environ.get(SERVER_ENV, "").strip().rstrip("/")
    if not url:
        return None, (
            f"NoETL's server not measured: {SERVER_ENV} is not set (start NoETL's server"
            " and workers yourself, see NoETL's documentation, and give its base URL)"
        )
    pids = [int(p) for p in os.environ.get(PIDS_ENV, "").replace(",", " ").split()]
    database = os.environ.get(PG_DB_ENV, "").strip()
    backends = (lambda: pg_backends("datname = $1", database)) if database else None
    engine = Engine("NoETL", url, lambda: pids, backends, cpu_measured=bool(pids))
    return engine, ""


def ended(status: dict[str, Any], last: str) -> bool:
    """Whether a `noetl status --json` reply says the run has ended (RunFailed if it failed)."""
    if status.get("failed"):
        raise RunFailed(json.dumps(status)[:500])
    return (
        bool(status.get("completed"))
        and not status.get("completion_inferred")
        and last in (status.get("completed_steps") or [])
    )


def rotated(items: list[Any], turn: int) -> list[Any]:
    """`items` starting at position `turn` (mod its length): round r's order."""
    if not items:
        return []
    k = turn % len(items)
    return items[k:] + items[:k]


# ------------------------------------------------------------------------------------ CPU


def cpu_s(pid: int) -> float:
    """utime + stime of a process so far, seconds (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def with_descendants(pids: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(pids)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.append(pid)
            todo.extend(children.get(pid, []))
    return found


def pg_backends(where: str, value: str) -> list[int]:
    """Backend pids from pg_stat_activity on the test server (NOETLC_TEST_PG_DSN)."""
    from noetlc.runtime.postgres.connect import connect
    from noetlc.runtime.postgres.testing import dsn_for_tests

    async def run() -> list[int]:
        conn = await connect(dsn_for_tests())
        try:
            rows = await conn.fetch(f"SELECT pid FROM pg_stat_activity WHERE {where}", value)
        finally:
            await conn.close()
        return [int(r["pid"]) for r in rows]

    return asyncio.run(run())


def cpu_sample(engine: Engine) -> dict[int, float] | None:
    if not engine.cpu_measured:
        return None
    pids = with_descendants(engine.pids())
    if engine.backends is not None:
        pids += engine.backends()
    return {pid: cpu_s(pid) for pid in pids}


def cpu_between(before: dict[int, float] | None, after: dict[int, float] | None) -> float | None:
    """CPU spent between two samples; a process new in `after` counts whole."""
    if before is None or after is None:
        return None
    return sum(max(0.0, spent - before.get(pid, 0.0)) for pid, spent in after.items())


# --------------------------------------------------------------------------------- client


class Client:
    """The NoETL client binary, run with a clean environment in a scratch folder."""

    def __init__(self, binary: Path, scratch: Path) -> None:
        self.binary, self.scratch = binary, scratch
        self.env = {"HOME": str(scratch), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}

    def call(self, engine: Engine, *args: str, timeout: float = 120) -> str:
        host, port = engine.host_port
        done = subprocess.run(
            [str(self.binary), "--host", host, "--port", str(port), *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.scratch,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RunFailed(f"noetl {' '.join(args)}: exit {done.returncode}: {done.stderr[-300:]}")
        return done.stdout

    def register(self, engine: Engine, text: str, name: str) -> str:
        path = self.scratch / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        self.call(engine, "catalog", "register", str(path))
        catalog_path: str = yaml.safe_load(text)["metadata"]["path"]
        return catalog_path

    def run(self, engine: Engine, catalog_path: str, last: str, timeout: float = 600) -> Run:
        before = cpu_sample(engine)
        started = time.perf_counter()
        out = self.call(engine, "run", catalog_path, "-r", "distributed", "--json")
        execution_id = json.loads(out.strip().splitlines()[-1])["execution_id"]
        polls = premature = 0
        while True:
            polls += 1
            reply = self.call(engine, "status", execution_id, "--json")
            status = json.loads(reply.strip().splitlines()[-1])
            if ended(status, last):
                wall = time.perf_counter() - started
                break
            premature += bool(status.get("completed"))
            if time.perf_counter() - started > timeout:
                raise RunFailed(f"{engine.name}: {catalog_path} did not end in {timeout:.0f} s")
            time.sleep(POLL_S)
        cpu = cpu_between(before, cpu_sample(engine))
        server_s = status.get("duration_seconds")
        return Run(wall, cpu, polls, premature, float(server_s) if server_s else None, execution_id)

    def startup_s(self, runs: int = 11) -> float:
        """Median wall time of `noetl --help`: the client's start-up, in every figure."""
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            subprocess.run(
                [str(self.binary), "--help"], capture_output=True, env=self.env, check=True
            )
            times.append(time.perf_counter() - started)
        return statistics.median(times)


def summary(runs: list[Run]) -> dict[str, Any]:
    cpus = [r.cpu_s for r in runs if r.cpu_s is not None]
    servers = [r.server_s for r in runs if r.server_s is not None]
    return {
        "wall_s": statistics.median(r.wall_s for r in runs),
        "cpu_s": statistics.median(cpus) if cpus else None,
        "server_s": statistics.median(servers) if servers else None,
        "polls": statistics.median(r.polls for r in runs),
        "premature": sum(r.premature for r in runs),
        "load": statistics.median(r.load for r in runs),
        "rounds": [{"wall_s": round(r.wall_s, 4), "cpu_s": r.cpu_s, "load": r.load} for r in runs],
    }


# ------------------------------------------------------------- where ours spends a step

STARTS = (EventName.STEP_SCHEDULED.value, EventName.LOOP_ITERATION_STARTED.value)
ENDS = (EventName.STEP_DONE.value, EventName.LOOP_ITERATION_DONE.value)
TASK_STARTED = EventName.TASK_STARTED.value
LEGS = ("pick-up", "task", "server")  # the three legs of a step through the queue


def legs(events: list[tuple[str, float]]) -> dict[str, float]:
    """Median ms of each leg of a step from an execution's (event name, epoch seconds) in
    order: pick-up = scheduled → `task.started` (the server's commit, the notification, a
    worker's lease), task = `task.started` → done (the task in its runner, the worker's
    commit), server = done → the next scheduled (the notification, the server's round and
    commit)."""
    found: dict[str, list[float]] = {leg: [] for leg in LEGS}
    scheduled = started = done = None
    for name, ts in events:
        if name in STARTS:
            if done is not None:
                found["server"].append(ts - done)
            scheduled, started, done = ts, None, None
        elif name == TASK_STARTED and scheduled is not None:
            found["pick-up"].append(ts - scheduled)
            started = ts
        elif name in ENDS and started is not None:
            found["task"].append(ts - started)
            done = ts
    return {leg: statistics.median(v) * 1e3 for leg, v in found.items() if v}


def our_events(engine: Engine, execution_id: str) -> list[tuple[str, float]]:
    """An execution's events from `noetl-vm serve`'s API (newest first, as NoETL's), in the
    order they happened."""
    import datetime as dt

    import httpx

    out: list[tuple[str, float]] = []
    with httpx.Client(base_url=engine.url, timeout=30) as http:
        page = 1
        while True:
            reply = http.get(
                f"/api/executions/{execution_id}/events",
                params={"page": page, "page_size": 500},
            )
            reply.raise_for_status()
            body = reply.json()
            for e in body["events"]:
                out.append((e["event_type"], dt.datetime.fromisoformat(e["timestamp"]).timestamp()))
            if not body.get("pagination", body).get("has_next"):
                return out[::-1]
            page += 1
