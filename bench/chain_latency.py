"""A 100-step noop chain and a 100-iteration sequential noop loop through a real cluster.

    NOETLC_TEST_PG_DSN=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python -m bench.chain_latency [--no-inline]

Starts one `noetl-vm server` (with `--no-inline`: every step goes through the job queue) and
one `noetl-vm worker --concurrency 8` on a throw-away schema, runs `noetl-vm submit --wait`
five times per playbook (from YAML and from `.nbc`) and prints the best wall time, where it
went (the submit process until its first event, the claim, first to last event, the close)
and, for the chain, the step-to-step latency from the events' timestamps: `step.done` to the
next `step.done`, split at the server's `step.scheduled`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from noetlc.ir.events import EventName
from noetlc.runtime.postgres.event_store import PostgresStore
from noetlc.runtime.postgres.testing import temporary_schema

N = 100
RUNS = 5
VM = [sys.executable, "-m", "noetlc.cli.vm_main"]


def _playbooks(folder: Path) -> list[Path]:
    lines = ["apiVersion: noetl.io/v2", "kind: Playbook", "metadata: {name: chain, path: b/chain}"]
    lines.append("workflow:")
    for i in range(N):
        lines += [f"  - step: {'start' if i == 0 else f's{i}'}", "    tool: {kind: noop}"]
        if i + 1 < N:
            lines.append(f"    next: {{arcs: [{{step: s{i + 1}}}]}}")
    chain = folder / "chain100.yaml"
    chain.write_text("\n".join(lines) + "\n")
    loop = folder / "loop100.yaml"
    loop.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: loop, path: b/loop}\n"
        f"workload: {{items: {list(range(N))}}}\n"
        "workflow:\n  - step: start\n"
        '    loop: {in: "{{ workload.items }}", iterator: x, spec: {mode: sequential}}\n'
        "    tool: {kind: noop}\n"
    )
    out = [chain, loop]
    for path in (chain, loop):
        nbc = path.with_suffix(".nbc")
        compile_ = [sys.executable, "-m", "noetlc.cli.noetlc_main", "compile", str(path)]
        subprocess.run([*compile_, "-o", str(nbc)], check=True, capture_output=True)
        out.append(nbc)
    return out


def _p(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"p50 {statistics.median(xs):.2f} ms, p90 {xs[int(len(xs) * 0.9)]:.2f} ms"


def _report(url: str, path: Path) -> None:
    runs: list[tuple[float, float, str]] = []
    for _ in range(RUNS):
        started, t0 = time.time(), time.perf_counter()
        out = subprocess.run(
            [*VM, "submit", str(path), "--db", url, "--wait", "--json"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["status"] == "completed", summary
        runs.append((time.perf_counter() - t0, started, summary["execution_id"]))
    wall, started, execution_id = min(runs)
    store = PostgresStore(url)
    try:
        events = store.read(execution_id)
        record: dict[str, Any] = store.execution(execution_id) or {}
    finally:
        store.close()
    first = events[0]["ts"]
    served = next(e["ts"] for e in events if e["source"] == "server")
    finished = record["finished_at"]
    finished = finished.timestamp() if hasattr(finished, "timestamp") else float(finished)
    print(
        f"{path.name}: submit --wait best of {RUNS} {wall:.3f} s"
        f" (all: {' '.join(f'{w:.3f}' for w, _, _ in runs)});"
        f" submit until its first event {(first - started) * 1000:.0f} ms,"
        f" claim {(served - first) * 1000:.1f} ms,"
        f" first to last event {(events[-1]['ts'] - served) * 1000:.1f} ms,"
        f" close {(finished - events[-1]['ts']) * 1000:.1f} ms"
    )
    if not path.stem.startswith("chain"):
        return
    done = {e["step"]: e["ts"] for e in events if e["name"] == EventName.STEP_DONE.value}
    scheduled = {e["step"]: e["ts"] for e in events if e["name"] == EventName.STEP_SCHEDULED.value}
    order = ["start", *[f"s{i}" for i in range(1, N)]]
    pairs = list(itertools.pairwise(order))
    print(f"  step.done -> next step.done: {_p([(done[b] - done[a]) * 1000 for a, b in pairs])}")
    print(f"  step.done -> next step.scheduled: {_p([(scheduled[b] - done[a]) * 1000 for a, b in pairs])}")  # fmt: skip
    print(f"  step.scheduled -> its step.done: {_p([(done[b] - scheduled[b]) * 1000 for _, b in pairs])}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-inline", action="store_true", help="server --no-inline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, temporary_schema("bench_latency") as url:
        playbooks = _playbooks(Path(tmp))
        server_args = ["--no-inline"] if args.no_inline else []
        procs = [
            subprocess.Popen([*VM, "server", "--db", url, *server_args], stderr=subprocess.DEVNULL),
            subprocess.Popen(
                [*VM, "worker", "--db", url, "--concurrency", "8"], stderr=subprocess.DEVNULL
            ),
        ]
        try:
            time.sleep(2)  # both running
            for path in playbooks:
                _report(url, path)
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                proc.wait(timeout=30)


if __name__ == "__main__":
    main()
