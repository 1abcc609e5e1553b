"""Test and benchmark support: `noetl-vm serve` as a real process on a free loopback port, and
the artifacts folder tests write to (`NOETLC_TEST_ARTIFACTS`, default `build/test-artifacts`)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent


def artifacts_dir() -> Path:
    folder = Path(os.environ.get("NOETLC_TEST_ARTIFACTS") or REPO / "build" / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Served:
    """`noetl-vm serve --db URL` on 127.0.0.1:PORT, stopped with SIGTERM (then SIGKILL)."""

    def __init__(
        self,
        db: str,
        cwd: Path,
        key: str,
        token: str | None = None,
        extra: list[str] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = token
        env = {**os.environ, "NOETL_CREDENTIAL_KEY": key}
        env.pop("NOETL_API_TOKEN", None)
        if token:  # from the environment: a token on the command line is in the process list
            env["NOETL_API_TOKEN"] = token
        args = [sys.executable, "-m", "noetlc.cli.vm_main", "serve", "--port", str(self.port)]
        args += ["--db", db, *(extra or [])]
        self.log = cwd / f"serve-{self.port}.log"
        self.proc = subprocess.Popen(
            args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=self.log.open("w")
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.url}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"noetl-vm serve did not start: {self.log.read_text()}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
