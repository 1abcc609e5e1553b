"""Task code in child processes (stdlib_tools/isolation.py): a clean environment, output
captured and handed to the runtime's log (never to our own output), limits that fail the task
alone, runners that never share a process with another task's credentials."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from noetlc.stdlib_tools import isolation
from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.registry import call_tool


@dataclass(frozen=True)
class LoggedContext(ToolContext):
    """ToolContext with the task log the runtime gives (the field the console adds)."""

    log: Callable[[str, str], None] | None = None


@pytest.fixture
def process_mode(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("NOETL_CREDENTIAL_KEY", "the-master-key-value")
    monkeypatch.setenv("NOETL_API_TOKEN", "the-api-token-value")
    isolation.configure(
        "process", isolation.TaskLimits(memory_bytes=512 * 1024**2, output_bytes=4096), spare=0
    )
    try:
        yield
    finally:
        isolation.pool().close()
        isolation.configure("inline")


def test_python_output_goes_to_the_log_not_to_our_output(
    process_mode: None, capfd: pytest.CaptureFixture[str]
) -> None:
    lines: list[tuple[str, str]] = []
    ctx = LoggedContext(log=lambda stream, text: lines.append((stream, text)))
    code = "import sys, os\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nresult = os.getpid()"
    out = call_tool("python", {"code": code}, None, ctx)
    assert out["status"] == "ok" and out["result"] != os.getpid()
    assert lines == [("stdout", "to stdout\n"), ("stderr", "to stderr\n")]
    assert out["py"]["stdout"] == "to stdout\n"
    captured = capfd.readouterr()
    assert "to stdout" not in captured.out + captured.err


BYTES_CODE = (
    "import sys\n"
    "sys.stdout.buffer.write(b'caf\\xc3')\n"  # a UTF-8 sequence cut across two writes
    "sys.stdout.buffer.write(b'\\xa9 raw \\xff\\xfe\\x00 end\\n')\n"
    "sys.stderr.buffer.write(b'err \\xc3')\n"  # cut at the end: escaped
    "enc = sys.stdout.encoding\n"
    "result = enc"
)


def test_bytes_written_to_the_binary_streams_are_captured(
    process_mode: None, capfd: pytest.CaptureFixture[str]
) -> None:
    """`sys.stdout.buffer.write(bytes)` works in a runner (it failed: the capture had no
    `buffer`), and what it wrote reaches the log decoded, invalid bytes kept as surrogates
    that the task log escapes."""
    lines: list[tuple[str, str]] = []
    ctx = LoggedContext(log=lambda stream, text: lines.append((stream, text)))
    out = call_tool("python", {"code": BYTES_CODE}, None, ctx)
    assert out["status"] == "ok", out
    assert out["result"] == "utf-8"
    assert lines == [("stdout", "caf\u00e9 raw \udcff\udcfe\x00 end\n"), ("stderr", "err \udcc3")]
    assert out["py"]["stdout"] == "caf\u00e9 raw \\xff\\xfe\\x00 end\n"
    captured = capfd.readouterr()
    assert "raw" not in captured.out + captured.err


def test_bytes_written_inline_go_to_the_log_not_to_our_output(
    capfd: pytest.CaptureFixture[str],
) -> None:
    lines: list[tuple[str, str]] = []
    ctx = LoggedContext(log=lambda stream, text: lines.append((stream, text)))
    out = call_tool("python", {"code": BYTES_CODE}, None, ctx)
    assert out["status"] == "ok", out
    assert "".join(t for s, t in lines if s == "stdout") == "caf\u00e9 raw \udcff\udcfe\x00 end\n"
    assert "".join(t for s, t in lines if s == "stderr") == "err \udcc3"
    captured = capfd.readouterr()
    assert "raw" not in captured.out + captured.err


def test_the_environment_is_clean(process_mode: None) -> None:
    code = "import os\nresult = dict(os.environ)"
    env = call_tool("python", {"code": code})["result"]
    assert "NOETL_CREDENTIAL_KEY" not in env and "NOETL_API_TOKEN" not in env
    assert set(env) <= set(isolation.ENV_KEEP) | {"PYTHONUNBUFFERED"} | {
        k for k in env if k.startswith("LC_")
    }
    shell = call_tool("shell", {"command": "env"})["result"]["stdout"]
    assert "the-master-key-value" not in shell and "the-api-token-value" not in shell


def test_output_over_the_limit_is_cut_and_the_service_goes_on(process_mode: None) -> None:
    printed = call_tool("python", {"code": "print('x' * 100000)\nresult = 1"})
    assert printed["status"] == "ok" and len(printed["py"]["stdout"]) < 5000
    assert "output cut" in printed["py"]["stdout"]
    huge = call_tool("python", {"code": "result = 'y' * 100000"})
    assert huge["status"] == "error" and huge["error"]["type"] == "OutputLimit"
    shell = call_tool("shell", {"command": "head -c 100000 /dev/zero | tr '\\\\0' z"})
    assert len(shell["result"]["stdout"]) < 5000 and "output cut" in shell["result"]["stdout"]
    assert call_tool("python", {"code": "result = 2"})["result"] == 2


def test_memory_and_time_limits_fail_the_task_alone(process_mode: None) -> None:
    greedy = call_tool("python", {"code": "b = bytearray(1024 * 1024 * 1024)\nresult = 1"})
    assert greedy["status"] == "error" and greedy["error"]["type"] == "MemoryError"
    slow = call_tool(
        "python", {"code": "while True:\n    pass"}, {"isolation": "subprocess", "timeout": 0.5}
    )
    assert slow["error"]["type"] == "Timeout"
    assert call_tool("python", {"code": "result = 3"})["result"] == 3


def test_a_cancelled_task_has_its_runner_killed(process_mode: None, tmp_path: Path) -> None:
    """A cancel kills the runner of a task that would run much longer: the task never reaches
    its end (a fail_fast loop's other iterations end this way on a worker, so a test waiting
    for their end waited forever: tests/postgres/test_pg_parity.py)."""
    pid_file, end_file = tmp_path / "pid", tmp_path / "end"
    code = (
        "import os, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(120)\n"
        f"open({str(end_file)!r}, 'w').write('end')\n"
        "result = 1"
    )
    flag = threading.Event()
    ctx = ToolContext(cancelled=flag.is_set)
    outcome: dict[str, Any] = {}
    caller = threading.Thread(
        target=lambda: outcome.update(call_tool("python", {"code": code}, None, ctx))
    )
    caller.start()
    while not (pid_file.exists() and pid_file.read_text()):
        time.sleep(0.01)
    flag.set()
    caller.join()
    assert outcome["status"] == "error" and outcome["error"]["type"] == "Cancelled"
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)  # killed and reaped
    assert not end_file.exists()


def test_a_task_with_credentials_never_shares_its_runner(process_mode: None) -> None:
    chain = Keychain(env={"NOETL_KEYCHAIN_API": "secret-value-1234"})
    ctx = ToolContext(keychain=chain)
    pid = "import os\nresult = os.getpid()"
    first = call_tool("python", {"code": pid})["result"]
    again = call_tool("python", {"code": pid})["result"]
    assert first == again  # a warm runner serves tasks without credentials one after another
    with_auth = call_tool("python", {"code": pid, "auth": {"api": "api"}}, None, ctx)["result"]
    assert with_auth != first  # a fresh runner ...
    after = call_tool("python", {"code": pid})["result"]
    assert after != with_auth  # ... retired after that task


def test_scrub_process_hides_values_from_proc(process_mode: None) -> None:
    import subprocess
    import sys

    code = (
        "import os, sys\n"
        "from noetlc.stdlib_tools.isolation import scrub_process\n"
        "scrub_process([os.environ['SECRET_X']])\n"
        "print(open('/proc/self/environ','rb').read().count(b'hidden-value-42'),"
        " open('/proc/self/cmdline','rb').read().count(b'hidden-value-42'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "hidden-value-42"],
        env={**os.environ, "SECRET_X": "hidden-value-42"},
        capture_output=True,
        text=True,
    )
    assert result.stdout.split() == ["0", "0"], result.stderr
