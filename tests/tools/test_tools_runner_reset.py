"""What a task can leave in a shared runner process for the next task (perhaps of another
execution), docs/runtime.md "Task isolation": the environment, builtins, `sys.path` and umask
are put back after every task; a task that leaves a thread, a child process, a trace function
or a signal handler behind retires its runner; a task that carries a keychain value (through
`auth:` or a template) gets a runner of its own. Imported modules are kept, on purpose."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from noetlc.stdlib_tools import isolation
from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.registry import call_tool

PID = "import os\nresult = os.getpid()"


@pytest.fixture
def process_mode() -> Iterator[None]:
    isolation.configure("process", spare=0)
    try:
        yield
    finally:
        isolation.pool().close()
        isolation.configure("inline")


def _pid() -> int:
    out = call_tool("python", {"code": PID})
    assert out["status"] == "ok", out
    pid: int = out["result"]
    return pid


def test_environment_builtins_path_and_umask_are_put_back(
    process_mode: None, tmp_path: Path
) -> None:
    here = ToolContext(workdir=tmp_path)
    first = call_tool("python", {"code": PID}, None, here)["result"]
    changed = call_tool(
        "python",
        {
            "code": "import os, sys, builtins\n"
            "os.environ['LEFT_BEHIND'] = 'x'\n"
            "builtins.left_behind = 1\n"
            "sys.path.insert(0, '/nowhere')\n"
            "os.umask(0)\n"
            "os.chdir('/')\n"
            "result = os.getpid()"
        },
        None,
        here,
    )
    assert changed["result"] == first  # the same runner
    seen = call_tool(
        "python",
        {
            "code": "import os, sys, builtins\n"
            "mask = os.umask(0o22); os.umask(mask)\n"
            "result = [os.getpid(), 'LEFT_BEHIND' in os.environ,"
            " hasattr(builtins, 'left_behind'), '/nowhere' in sys.path, mask, os.getcwd()]"
        },
        None,
        here,
    )["result"]
    assert seen[0] == first  # still the same runner, and nothing of the task before
    assert seen[1:4] == [False, False, False] and seen[4] != 0
    assert seen[5] == str(tmp_path)  # in its playbook's folder, wherever the last one went


@pytest.mark.parametrize(
    "code",
    [
        "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()",
        "import subprocess\nsubprocess.Popen(['sleep', '30'])",
        "import sys\nsys.settrace(lambda *a: None)",
        "import signal\nsignal.signal(signal.SIGTERM, lambda *a: None)",
    ],
    ids=["thread", "child", "trace", "signal"],
)
def test_a_task_that_leaves_something_running_retires_its_runner(
    process_mode: None, code: str
) -> None:
    first = _pid()
    out = call_tool("python", {"code": code + "\nimport os\nresult = os.getpid()"})
    assert out["status"] == "ok" and out["result"] == first, out
    assert _pid() != first


def test_a_child_that_ended_does_not_retire_the_runner(process_mode: None) -> None:
    first = _pid()
    call_tool("python", {"code": "import subprocess\nsubprocess.Popen(['true']).wait()"})
    assert _pid() == first


def test_a_task_carrying_a_keychain_value_gets_a_runner_of_its_own(process_mode: None) -> None:
    chain = Keychain(env={"NOETL_KEYCHAIN_API": "secret-value-1234"}, no_file=True)
    chain.resolve("api")  # as a template reading keychain.api does
    ctx = ToolContext(keychain=chain)
    shared = _pid()
    plain = call_tool("python", {"code": PID, "input": {"x": "nothing secret"}}, None, ctx)
    assert plain["result"] == shared
    carrying = call_tool(
        "python", {"code": PID, "input": {"dsn": "postgres://u:secret-value-1234@h/db"}}, None, ctx
    )
    assert carrying["status"] == "ok" and carrying["result"] != shared
    assert _pid() not in (carrying["result"],)  # retired after it


def test_imported_modules_are_kept_for_the_next_task(process_mode: None) -> None:
    call_tool("python", {"code": "import json\njson.noetlc_mark = 7\nresult = 1"})
    out = call_tool("python", {"code": "import json\nresult = getattr(json, 'noetlc_mark', 0)"})
    assert out["result"] == 7  # documented: module state outlives a task in its runner
    assert os.getpid() != _pid()
