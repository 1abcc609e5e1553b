"""The wheel as a user gets it: build it, install it in a fresh virtualenv, run it from there.

    python scripts/wheel_check.py [--keep]

Builds the sdist and the wheel (`python -m build`, failing on any build warning), prints the
wheel's data files, installs `noetlc[service,postgres]` from the wheel into a new virtualenv
and, from a folder outside the repository (so nothing is imported from the source tree), runs
with that install's commands:

1. `noetlc check` and `noetl-vm run` of examples/hello.yaml (embedded, SQLite);
2. `noetl-vm db upgrade` on a throw-away PostgreSQL schema, a `server` and a `worker`, then
   `submit --wait` and `status` (the distributed mode, which needs the packaged SQL);
3. `noetl-vm serve` driven by the NoETL client from PyPI (register, run, status).

Each step prints one line (command, exit code, seconds); the last line counts them. PostgreSQL
is `$NOETLC_TEST_PG_DSN` (default postgresql://postgres@127.0.0.1:5432/postgres). Run by
.ci/run after `make test`; needs the dev extras (`build`, and the NoETL client's installer).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
HELLO = REPO / "examples" / "hello.yaml"


class Check:
    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.work = work
        self.env = env
        self.passed = 0
        self.failed = 0

    def run(self, *args: str, expect: int = 0, timeout: float = 180) -> str:
        started = time.monotonic()
        result = subprocess.run(
            args, cwd=self.work, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        ok = result.returncode == expect
        shown = " ".join(Path(args[0]).name if i == 0 else a for i, a in enumerate(args))
        took = time.monotonic() - started
        print(f"{'ok  ' if ok else 'FAIL'} $ {shown}  [exit {result.returncode}, {took:.1f} s]")
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(_indent(result.stdout + result.stderr))
        return result.stdout

    def expect(self, what: str, ok: bool, detail: str = "") -> None:
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(_indent(detail))


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.strip().splitlines()[-30:])


def build(out: Path) -> Path:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    result = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    log = result.stdout + result.stderr
    warnings = [
        line
        for line in log.splitlines()
        if any(w in line.lower() for w in ("warning", "would be ignored", "deprecat"))
    ]
    if result.returncode != 0 or warnings:
        sys.exit(f"the build failed or warned:\n{_indent(chr(10).join(warnings) or log)}")
    (wheel,) = out.glob("*.whl")
    print(f"built {wheel.name} without warnings; its data files:")
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.filename.startswith("noetlc/") and not info.filename.endswith(".py"):
                print(f"  {info.file_size:>7}  {info.filename}")
    return wheel


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def stop(procs: list[subprocess.Popen[Any]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def distributed(check: Check, bin_dir: Path) -> None:
    from noetlc.runtime.postgres.testing import drop_schema_sync, dsn_for_tests, with_schema

    vm = str(bin_dir / "noetl-vm")
    dsn = dsn_for_tests()
    schema = f"noetl_wheel_{uuid.uuid4().hex[:12]}"
    url = with_schema(dsn, schema)
    procs: list[subprocess.Popen[Any]] = []
    try:
        check.run(vm, "db", "upgrade", "--db", url)
        for role in ("server", "worker"):
            with open(check.work / f"{role}.log", "w") as log:
                procs.append(
                    subprocess.Popen(
                        [vm, role, "--db", url, "--ttl", "2", "--poll", "0.2"],
                        cwd=check.work,
                        env=check.env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        out = check.run(vm, "submit", "hello.yaml", "--db", url, "--wait", "--timeout", "90")
        out = check.run(vm, "status", "--db", url, "--json")
        rows = json.loads(out or "[]")
        done = [r for r in rows if r.get("status") == "completed"] if isinstance(rows, list) else []
        check.expect("the distributed execution completed", len(done) == 1, out)
    finally:
        stop(procs)
        drop_schema_sync(dsn, schema)


def served(check: Check, bin_dir: Path) -> None:
    from noetlc.bench.peers import PeerUnavailable, ensure
    from noetlc.runtime.credentials import new_key

    try:
        client = ensure("NoETL client 5.3.2").parent / "noetl"
    except PeerUnavailable as exc:
        check.expect("the NoETL client installs", False, str(exc))
        return
    port = free_port()
    env = {**check.env, "NOETL_CREDENTIAL_KEY": new_key()}
    log = (check.work / "serve.log").open("w")
    proc = subprocess.Popen(
        [str(bin_dir / "noetl-vm"), "serve", "--port", str(port), "--db", "sqlite:///serve.db"],
        cwd=check.work,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        import httpx

        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        check.expect("noetl-vm serve answers /api/health", proc.poll() is None)
        noetl = (str(client), "--host", "127.0.0.1", "--port", str(port))
        check.run(*noetl, "register", "playbook", "--file", "hello.yaml")
        out = check.run(*noetl, "run", "examples/hello", "-r", "distributed", "--json")
        execution_id = json.loads(out.strip().splitlines()[-1])["execution_id"] if out else ""
        status: dict[str, Any] = {}
        deadline = time.monotonic() + 60
        while execution_id and time.monotonic() < deadline and not status.get("completed"):
            shown = subprocess.run(
                [*noetl, "status", str(execution_id), "--json"],
                cwd=check.work,
                env=check.env,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
            status = json.loads(shown.strip().splitlines()[-1]) if shown.strip() else {}
            time.sleep(0.2)
        check.expect(
            "the NoETL client sees the execution completed",
            bool(status.get("completed")) and not status.get("failed"),
            json.dumps(status),
        )
    finally:
        stop([proc])
        log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="noetlc-wheel-"))
    try:
        wheel = build(tmp / "dist")
        venv = tmp / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        bin_dir = venv / "bin"
        work = tmp / "work"
        work.mkdir()
        shutil.copy(HELLO, work / "hello.yaml")
        env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "NOETLC_CACHE_DIR": str(tmp / "cache"),
            "HOME": str(tmp / "home"),
            "NO_COLOR": "1",
        }
        env.pop("NOETL_DB", None)
        env.pop("PYTHONPATH", None)
        check = Check(work, env)
        check.run(str(bin_dir / "pip"), "install", "--quiet", f"{wheel}[service,postgres]")
        check.run(
            str(bin_dir / "python"),
            "-c",
            "import noetlc, sys; assert 'site-packages' in noetlc.__file__, noetlc.__file__",
        )
        check.run(str(bin_dir / "noetlc"), "check", "hello.yaml")
        check.run(str(bin_dir / "noetl-vm"), "run", "hello.yaml", "--db", "sqlite:///x.db")
        distributed(check, bin_dir)
        served(check, bin_dir)
        print(f"wheel check: {check.passed} passed, {check.failed} failed")
        return 1 if check.failed else 0
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
