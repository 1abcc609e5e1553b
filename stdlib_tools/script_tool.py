"""The `script` tool: run a Python script as a program, as NoETL's script tool does.

NoETL (noetl/tools/script/__init__.py, `execute_script_task`) reads the script from
`script: {uri, source}` and runs it in a Kubernetes job as `python3 -u script.py '<args as
JSON>'`, with the rendered `job.env` as environment variables and `job.install_dependencies`
pip-installed first; the job's pod log is the result's `output`, and a non-zero exit fails the
task. noetlc runs the same command as a local process (this machine's Python, a fresh
environment of `PATH`, `HOME`, `LANG` and `job.env`), killed after `job.timeout` seconds
(NoETL's default: 600). Dependencies are not installed: a listed one that is not importable
fails the task before the script runs, naming it. The Kubernetes settings (`image`,
`namespace`, `resources`, ...) have no meaning here and are kept in the result only.

The result has NoETL's keys: `{status, job_name, namespace, pod_name, execution_time, output,
succeeded, failed, exit_code}` (`pod_name` is null: there is no pod); `stderr` is added.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.envelope import error, ok
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.schemas import ScriptArgs
from noetlc.stdlib_tools.script_source import ScriptError, load

DEFAULT_TIMEOUT = 600.0
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9_.-]+)")


def run(
    args: ScriptArgs, spec: dict[str, Any], ctx: ToolContext, keychain: Keychain
) -> dict[str, Any]:
    job = args.job
    timeout = job.timeout if job is not None else DEFAULT_TIMEOUT
    missing = [d for d in (job.install_dependencies or []) if not _importable(d)] if job else []
    if missing:
        return error(
            "ScriptError",
            f"the script needs {', '.join(missing)}, which is not installed: NoETL pip-installs "
            "`job.install_dependencies` in its job, noetlc runs the script with this Python",
            hint=f"install {' '.join(missing)} in noetlc's environment",
        )
    try:
        code = load(args.script, ctx)
    except ScriptError as exc:
        return error("ScriptError", str(exc))
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "LC_ALL") if k in os.environ}
    for key, value in ((job.env or {}) if job is not None else {}).items():
        env[str(key)] = value if isinstance(value, str) else json.dumps(value)
    name = str(ctx.task or "script_job").replace("_", "-")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="noetl-script-") as folder:
        path = Path(folder) / "script.py"
        path.write_text(code, encoding="utf-8")
        argv = [sys.executable, "-u", str(path), json.dumps(args.args or {})]
        done = _run(argv, ctx.workdir, env, timeout)
    elapsed = round(time.monotonic() - started, 3)
    extra = job.model_extra or {} if job is not None else {}
    result: dict[str, Any] = {
        "job_name": f"script-{name}",
        "namespace": extra.get("namespace", "noetl"),
        "pod_name": None,
        "execution_time": elapsed,
    }
    if done is None:
        result.update(status="failed", output="", succeeded=0, failed=1, exit_code=None)
        outcome = error(
            "Timeout",
            f"the script did not finish within {timeout:g} s; it was killed",
            retryable=True,
        )
        outcome["result"] = result
        return outcome
    out, err, code_ = done
    failed = code_ != 0
    result.update(
        status="failed" if failed else "completed",
        output=out,
        stderr=err,
        succeeded=0 if failed else 1,
        failed=1 if failed else 0,
        exit_code=code_,
    )
    if failed:
        last = err.strip().splitlines()
        detail = f": {last[-1]}" if last else ""
        return error(
            "ScriptError",
            f"the script exited with code {code_}{detail}",
            result=result,
            returncode=code_,
        )
    return ok(result)


def _run(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> tuple[str, str, int] | None:
    """(stdout, stderr, exit code), or None when `timeout` passed (the script's whole process
    group is killed: children it started would otherwise keep the pipes open)."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.communicate(timeout=2.0)
        return None
    return out, err, process.returncode


def _importable(requirement: str) -> bool:
    """A pip requirement (`pandas>=2`, `google-cloud-storage`) whose module can be imported:
    its name with `-` read as `_`, or its last dotted/dashed part (`google-cloud-storage` ->
    `google.cloud.storage`)."""
    found = _REQUIREMENT.match(requirement)
    if found is None:
        return True  # not a requirement we can read: let the script say what it misses
    name = found.group(1)
    for module in (name.replace("-", "_"), name.replace("-", ".")):
        try:
            if importlib.util.find_spec(module) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False
