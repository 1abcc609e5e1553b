"""`noetl-vm serve` as an operator meets it: the first start creates its credential key (0600,
beside the store, and says where), stores are 0600, and each mistake is a coded message with
the exit code of the README's table: a port in use or a store already served (5), a bad port,
log level or token (2)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from noetlc.runtime.credentials import new_key
from noetlc.service.serving import free_port

VM = [sys.executable, "-m", "noetlc.cli.vm_main", "serve"]
SECRETS = ("NOETL_CREDENTIAL_KEY", "NOETL_API_TOKEN")


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in SECRETS}
    out.update(extra)
    return out


def serve(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*VM, *args], cwd=cwd, env=env(**extra), capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def running(tmp_path: Path):  # type: ignore[no-untyped-def]
    port = free_port()
    (tmp_path / "data").mkdir()  # a store's folder is never created for it (NOE803)
    db = f"sqlite:///{tmp_path / 'data' / 'noetl.db'}"
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        [*VM, "--port", str(port), "--db", db], cwd=tmp_path, env=env(), stderr=log
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, (
            tmp_path / "serve.log"
        ).read_text()
        time.sleep(0.1)
    try:
        yield port, db, tmp_path / "data"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def test_the_first_start_creates_a_private_key_beside_the_store(running, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    port, _db, folder = running
    key = folder / "credential.key"
    assert key.is_file() and stat.S_IMODE(key.stat().st_mode) == 0o600
    assert str(key) in (tmp_path / "serve.log").read_text()
    for name in ("noetl.db", "noetl.db-wal"):
        path = folder / name
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
    # credentials work without any key step
    made = httpx.post(
        f"http://127.0.0.1:{port}/api/credentials",
        json={"name": "pg", "data": {"password": "pw-123456"}},
    )
    assert made.status_code == 200, made.text


def test_a_mistyped_store_folder_is_refused_with_or_without_a_key(tmp_path: Path) -> None:
    # the key a first start writes beside the store must not create the store's folder: the
    # same command is NOE803 whether or not a key was given
    db = f"sqlite:///{tmp_path / 'typo' / 'noetl.db'}"
    for extra in ({}, {"NOETL_CREDENTIAL_KEY": new_key()}):
        result = serve("--port", str(free_port()), "--db", db, cwd=tmp_path, **extra)
        assert result.returncode == 5 and "error[NOE803]" in result.stderr, result.stderr
        assert not (tmp_path / "typo").exists()


def test_a_second_serve_and_a_busy_port_are_refused(running, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    port, db, _ = running
    same_store = serve("--port", str(free_port()), "--db", db, cwd=tmp_path)
    assert same_store.returncode == 5 and "error[NOE881]" in same_store.stderr
    busy = serve("--port", str(port), "--db", f"sqlite:///{tmp_path / 'b.db'}", cwd=tmp_path)
    assert busy.returncode == 5 and "error[NOE880]" in busy.stderr and "in use" in busy.stderr
    assert "Traceback" not in same_store.stderr + busy.stderr


@pytest.mark.parametrize(
    ("args", "extra", "code"),
    [
        (["--port", "99999"], {}, "NOE800"),
        (["--port", "0"], {}, "NOE800"),
        (["--log-level", "banana"], {}, "NOE800"),
        ([], {"NOETL_API_TOKEN": " "}, "NOE882"),
        ([], {"NOETL_API_TOKEN": "short"}, "NOE882"),
        (["--token", "  "], {}, "NOE882"),
        (["--max-body-bytes", "0"], {}, "NOE800"),
    ],
)
def test_operator_mistakes_exit_2_with_a_code(
    tmp_path: Path, args: list[str], extra: dict[str, str], code: str
) -> None:
    result = serve(*args, "--db", "memory:", cwd=tmp_path, **extra)
    assert result.returncode == 2 and f"error[{code}]" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_token_file_is_read_and_a_command_line_token_is_warned(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("tiny\n")
    short = serve("--token-file", "token", "--db", "memory:", cwd=tmp_path)
    assert short.returncode == 2 and "error[NOE882]" in short.stderr and "token" in short.stderr
    missing = serve("--token-file", "nope", "--db", "memory:", cwd=tmp_path)
    assert missing.returncode == 2 and "error[NOE882]" in missing.stderr
    import socket

    with socket.socket() as held:  # a busy port: serve stops after the warning
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = str(held.getsockname()[1])
        warned = serve("--token", "x" * 20, "--port", port, "--db", "memory:", cwd=tmp_path)
    assert "lists processes" in warned.stderr
    assert warned.returncode == 5 and "error[NOE880]" in warned.stderr


def test_the_limit_flags_default_to_the_service_limits() -> None:
    """One place for each limit's default: the flags read `service.limits.Limits`."""
    import argparse
    from dataclasses import fields

    from noetlc.cli.vm_commands import serve
    from noetlc.service.limits import Limits

    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    parsed = parser.parse_args([])
    for f in fields(Limits):
        assert getattr(parsed, f"max_{f.name}") == getattr(Limits(), f.name), f.name
