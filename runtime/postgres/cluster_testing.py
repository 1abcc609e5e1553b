"""Test support: real `noetl-vm` server and worker processes on one PostgreSQL schema.

`Cluster` starts servers and workers as subprocesses (stopped with SIGTERM, then SIGKILL), and
submits playbooks through `noetl-vm submit`. A server or worker writes its output to files in
the cluster's folder (`output(proc)` reads them): a long run logs more than a pipe holds, and a
pipe nobody reads until the end would block the process on its next log line. Each cluster names its connections
`<application_name>_server` / `_worker`, so a test can terminate this cluster's backends
without touching anyone else's.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from noetlc.runtime.postgres.event_store import PostgresStore


def run_vm(*args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
    """`python -m noetlc.cli.vm_main ARGS...` with captured text output (pipes: for commands
    that end, read with `communicate`)."""
    return subprocess.Popen(
        [sys.executable, "-m", "noetlc.cli.vm_main", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_vm_logged(*args: str, cwd: Path, name: str) -> subprocess.Popen[str]:
    """A long-running `noetl-vm` command whose stdout and stderr go to `cwd/NAME.out` and
    `cwd/NAME.err`."""
    with open(cwd / f"{name}.out", "w") as out, open(cwd / f"{name}.err", "w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "noetlc.cli.vm_main", *args],
            cwd=cwd,
            stdout=out,
            stderr=err,
            text=True,
        )


class Cluster:
    def __init__(self, url: str, tmp: Path) -> None:
        self.url = url
        self.tmp = tmp
        self.procs: list[subprocess.Popen[str]] = []
        self.logs: dict[int, str] = {}  # pid -> the base name of its output files
        self.application_name = f"noetl_test_{uuid.uuid4().hex[:12]}"

    def name_of(self, role: str) -> str:
        return f"{self.application_name}_{role}"

    def url_for(self, role: str) -> str:
        joiner = "&" if "?" in self.url else "?"
        return f"{self.url}{joiner}application_name={self.name_of(role)}"

    def server(self, ttl: float = 2.0, poll: float = 0.2, *extra: str) -> subprocess.Popen[str]:
        url = self.url_for("server")
        args = ("server", *extra, "--db", url, "--ttl", str(ttl), "--poll", str(poll))
        return self._start("server", args)

    def worker(self, concurrency: int = 4, ttl: float = 2.0, *extra: str) -> subprocess.Popen[str]:
        return self._start(
            "worker",
            (
                "worker",
                *extra,
                "--db",
                self.url_for("worker"),
                "--concurrency",
                str(concurrency),
                "--ttl",
                str(ttl),
                "--poll",
                "0.2",
                "--grace",
                "1",
            ),
        )

    def _start(self, role: str, args: tuple[str, ...]) -> subprocess.Popen[str]:
        name = f"{self.application_name}-{role}-{len(self.procs)}"
        proc = run_vm_logged(*args, cwd=self.tmp, name=name)
        self.procs.append(proc)
        self.logs[proc.pid] = name
        return proc

    def output(self, proc: subprocess.Popen[str], timeout: float = 30) -> tuple[str, str]:
        """A server's or worker's (stdout, stderr), once it has ended."""
        proc.wait(timeout=timeout)
        name = self.logs[proc.pid]
        return (
            (self.tmp / f"{name}.out").read_text(encoding="utf-8", errors="replace"),
            (self.tmp / f"{name}.err").read_text(encoding="utf-8", errors="replace"),
        )

    def submit(
        self, playbook: Path, *sets: str, wait: bool = True, timeout: float = 90
    ) -> dict[str, Any]:
        """`noetl-vm submit --json`: the summary (with `wait`) or the started execution."""
        args = ["submit", str(playbook), "--db", self.url, "--json"]
        for item in sets:
            args += ["--set", item]
        if wait:
            args += ["--wait", "--timeout", str(timeout)]
        proc = run_vm(*args, cwd=self.tmp)
        out, err = proc.communicate(timeout=timeout + 30)
        assert out.strip(), err
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    def events(self, execution_id: str) -> list[dict[str, Any]]:
        store = PostgresStore(self.url)
        try:
            return store.read(execution_id)
        finally:
            store.close()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
