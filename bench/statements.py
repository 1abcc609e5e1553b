"""SQL statements per distributed step: a python chain and a sequential python loop through
one server (`--no-inline`: every step is a job) and two workers, each process counting the
statements its asyncpg connections send.

    NOETLC_TEST_PG_DSN=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python -m bench.statements

Each process runs under `python -m noetlc.bench.statements count OUT -- noetl-vm ARGS`, which
wraps asyncpg's statement-sending methods (`execute`, `fetch*`, `executemany`, copies) with
a counter by process and by kind (BEGIN, COMMIT, a pool reset, other) and writes it to OUT
every 0.2 s. The counts of the idle processes are taken right before a submit and after it;
their difference over the steps is the figure (`test_bench_distributed.py` records it).
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

VM = [sys.executable, "-m", "noetlc.cli.vm_main"]
_METHODS = (
    "execute",
    "executemany",
    "fetch",
    "fetchrow",
    "fetchval",
    "fetchmany",
    "copy_records_to_table",
    "copy_to_table",
    "copy_from_query",
    "copy_from_table",
)
N = 50
BY_TEXT = bool(os.environ.get("NOETLC_BENCH_SQL_TEXT"))  # "other" split by statement text


def _kind(query: Any) -> str:
    text = str(query).lstrip().upper()
    if text.startswith("SELECT PG_ADVISORY_UNLOCK_ALL") or "RESET ALL" in text:
        return "pool reset"
    for word in ("BEGIN", "COMMIT", "ROLLBACK"):
        if text.startswith(word):
            return word
    return "other"


def count(out: str, argv: list[str]) -> int:
    """Run `noetl-vm ARGV` in this process with asyncpg's statements counted into OUT."""
    import asyncpg

    counts: collections.Counter[str] = collections.Counter()
    local = threading.local()

    def wrap(name: str) -> None:
        original = getattr(asyncpg.Connection, name)

        async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(local, "inside", False):  # a method calling another: one statement
                return await original(self, *args, **kwargs)
            kind = _kind(args[0]) if args else "other"
            if kind == "other" and BY_TEXT and args:
                kind = "other: " + " ".join(str(args[0]).split())[:70]
            counts[kind] += 1
            local.inside = True
            try:
                return await original(self, *args, **kwargs)
            finally:
                local.inside = False

        setattr(asyncpg.Connection, name, counted)

    for name in _METHODS:
        if hasattr(asyncpg.Connection, name):
            wrap(name)

    def dump() -> None:
        while True:
            Path(out + ".tmp").write_text(json.dumps(dict(counts)))
            os.replace(out + ".tmp", out)
            time.sleep(0.2)

    threading.Thread(target=dump, daemon=True).start()
    from noetlc.cli.vm_main import main as vm_main

    return int(vm_main(argv) or 0)


def _read(paths: list[Path]) -> collections.Counter[str]:
    total: collections.Counter[str] = collections.Counter()
    for path in paths:
        total.update(json.loads(path.read_text()))
    return total


def _playbooks(folder: Path) -> dict[str, Path]:
    lines = ["apiVersion: noetl.io/v2", "kind: Playbook", "metadata: {name: chain, path: b/c}"]
    lines.append("workflow:")
    for i in range(N):
        lines += [
            f"  - step: {'start' if i == 0 else f's{i}'}",
            "    tool: {kind: python, code: 'result = 1'}",
        ]
        if i + 1 < N:
            lines.append(f"    next: s{i + 1}")
    chain = folder / "chain.yaml"
    chain.write_text("\n".join(lines) + "\n")
    loop = folder / "loop.yaml"
    loop.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: loop, path: b/l}\n"
        f"workload: {{items: {list(range(N))}}}\n"
        "workflow:\n  - step: start\n"
        '    loop: {in: "{{ workload.items }}", iterator: x, spec: {mode: sequential}}\n'
        "    tool: {kind: python, input: {x: '{{ x }}'}, code: 'result = x'}\n"
    )
    return {"python chain": chain, "sequential python loop": loop}


def measure(url: str, workers: int = 2) -> dict[str, dict[str, float]]:
    """Statements per step of each playbook, by kind and in all (`total`)."""
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        playbooks = _playbooks(folder)
        me = [sys.executable, "-m", "noetlc.bench.statements", "count"]
        outs = [folder / "server.json", *[folder / f"worker{i}.json" for i in range(workers)]]
        commands = [["server", "--db", url, "--no-inline"]] + [
            ["worker", "--db", url, "--concurrency", "4"] for _ in range(workers)
        ]
        procs = [
            subprocess.Popen([*me, str(out), "--", *cmd], stderr=subprocess.DEVNULL)
            for out, cmd in zip(outs, commands, strict=True)
        ]
        try:
            deadline = time.monotonic() + 60
            while not all(p.exists() for p in outs):
                if time.monotonic() > deadline:
                    raise RuntimeError("the server or a worker did not start")
                time.sleep(0.2)
            for label, path in playbooks.items():
                subprocess.run(
                    [*VM, "submit", str(path), "--db", url, "--wait"],
                    check=True,
                    capture_output=True,
                )  # warm-up: the program is decoded and cached
                time.sleep(1.5)
                before = _read(outs)
                subprocess.run(
                    [*VM, "submit", str(path), "--db", url, "--wait"],
                    check=True,
                    capture_output=True,
                )
                time.sleep(1.5)  # the idle processes' counts settle (dumped every 0.2 s)
                after = _read(outs)
                # idle polling between runs is counted too: measured over the same pause
                time.sleep(1.5)
                idle = _read(outs)
                delta = after - before
                noise = idle - after
                kinds = {k: (delta[k] - noise[k]) / N for k in set(delta) | set(noise)}
                kinds["total"] = sum(kinds.values())
                results[label] = kinds
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    return results


def main() -> int:
    if len(sys.argv) > 3 and sys.argv[1] == "count" and sys.argv[3] == "--":
        return count(sys.argv[2], sys.argv[4:])
    from noetlc.runtime.postgres.testing import temporary_schema

    with temporary_schema("bench_statements") as url:
        for label, kinds in measure(url).items():
            shown = ", ".join(f"{k} {v:.2f}" for k, v in sorted(kinds.items()))
            print(f"{label}: statements per step: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
