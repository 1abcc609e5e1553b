"""The `shell` tool: run a command (or several) and capture its output.

`command:` is a command line run by `bash -c` as NoETL does (`/bin/sh -c` where bash is not
installed), or a list run directly (no shell, no quoting problems); `cmds:`/`commands:` are command lines run one after another, stopping at the first
that fails (one string instead of a list is one script). `env:` is added to the environment, `cwd:` is relative to the playbook's folder.
The result is `{stdout, stderr, returncode}` (for `cmds:` the outputs are concatenated and
`returncode` is the last one's). A non-zero exit is an error outcome (`ShellError`) that still
carries that result; when `timeout:` (else `spec.timeout`) passes, the whole process group is
killed and the outcome is a `Timeout` error.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from noetlc.stdlib_tools import isolation
from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error, ok
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.schemas import ShellArgs

KILL_GRACE = 2.0
# NoETL's shell tool runs command lines with bash (`read -s`, `[[ ]]`, arrays, `pipefail`)
SHELL = shutil.which("bash")


def run(
    args: ShellArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    cwd = ctx.workdir / args.cwd if args.cwd else ctx.workdir
    if not Path(cwd).is_dir():
        return error("ToolArgumentError", f"`cwd:` {cwd} is not a directory")
    policy = isolation.policy()
    # in the service and its workers a task does not see their environment (the credential
    # key, the API token): only the names isolation.clean_env keeps, and its own `env:`
    env = isolation.clean_env() if policy.mode == "process" else dict(os.environ)
    env.update({str(k): "" if v is None else str(v) for k, v in (args.env or {}).items()})
    timeout = args.timeout if args.timeout is not None else _number(spec.get("timeout"))
    commands: list[str | list[str]]
    if isinstance(args.commands, str):  # `cmds: "..."`: one script
        commands = [args.commands]
    elif args.commands is not None:
        commands = list(args.commands)
    else:
        commands = [args.command or ""]
    stdout: list[str] = []
    stderr: list[str] = []
    returncode = 0
    for command in commands:
        done = _run_one(command, cwd, env, timeout, policy)
        if done is None:
            outcome = error(
                "Timeout",
                f"the command did not finish within {timeout:g} s; it was killed",
                retryable=True,
            )
            outcome["result"] = {"stdout": "".join(stdout), "stderr": "".join(stderr)}
            return outcome
        out, err, returncode = done
        if ctx.log is not None:  # the task's log (the result keeps the output as well)
            ctx.log("stdout", out)
            ctx.log("stderr", err)
        stdout.append(out)
        stderr.append(err)
        if returncode != 0:
            break
    err_text = "".join(stderr)  # each command's output went to the task's log as it ended
    result = {"stdout": "".join(stdout), "stderr": err_text, "returncode": returncode}
    if returncode != 0:
        last = err_text.strip().splitlines()
        detail = f": {last[-1]}" if last else ""
        return error(
            "ShellError",
            f"the command exited with code {returncode}{detail}",
            result=result,
            returncode=returncode,
        )
    return ok(result)


def _run_one(
    command: str | list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float | None,
    policy: isolation.Policy,
) -> tuple[str, str, int] | None:
    """(stdout, stderr, returncode), or None on timeout (the process group is killed: with
    `bash -c`, grandchildren would otherwise keep the pipes open and the wait would hang).

    The output goes to temporary files, not pipes: in `process` mode only the first
    `output_bytes` of each are read back, however much the command writes."""
    limits = policy.limits if policy.mode == "process" else None
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        try:
            process = subprocess.Popen(
                command,
                shell=isinstance(command, str),
                executable=SHELL if isinstance(command, str) else None,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out_file,
                stderr=err_file,
                start_new_session=True,
                preexec_fn=None if limits is None else partial(isolation.set_limits, limits),
            )
        except OSError as exc:  # an argument vector naming a program that does not exist
            return "", f"{exc.strerror}: {exc.filename or command}\n", 127
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=KILL_GRACE)
            return None
        cap = None if limits is None else limits.output_bytes
        return _read(out_file, cap), _read(err_file, cap), process.returncode


def _read(file: Any, cap: int | None) -> str:
    file.seek(0)
    data = file.read() if cap is None else file.read(cap + 1)
    text: str = data[: cap if cap is not None else len(data)].decode("utf-8", "replace")
    if cap is not None and len(data) > cap:
        text += "\n[output cut at the task's output limit]\n"
    return text


def _kill_group(process: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
