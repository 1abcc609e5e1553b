"""`pip install noetlc` without extras: the compiler and the embedded runtime work; what needs
`noetlc[service]` or `noetlc[postgres]` stops with NOE820 naming the extra (exit 2), and a
postgres task fails with `ToolUnavailable` naming it. The extras' packages are hidden from a
child interpreter by an import hook, as if they were not installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from noetlc.diagnostics.extras import EXTRAS

REPO = Path(__file__).resolve().parents[2]

HIDE = """
import sys
HIDDEN = EXTRA_PACKAGES
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Hide())
from noetlc.cli.MODULE import main
sys.exit(main(sys.argv[1:]))
"""


def _without_extras(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NOETL_CREDENTIAL_KEY": "", "NOETL_DB": ""}
    return subprocess.run(
        [
            sys.executable,
            "-c",
            HIDE.replace("EXTRA_PACKAGES", repr(sorted(EXTRAS))).replace("MODULE", module),
            *args,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_and_an_embedded_run_need_no_extra(tmp_path: Path) -> None:
    hello = str(REPO / "examples" / "hello.yaml")
    assert _without_extras("noetlc_main", "check", hello, cwd=tmp_path).returncode == 0
    ran = _without_extras("vm_main", "run", hello, "--db", "memory:", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (("serve", "--port", "1"), "service"),
        (("db", "status", "--db", "postgresql://u@127.0.0.1:1/x"), "postgres"),
        (("status", "--db", "postgresql://u@127.0.0.1:1/x"), "postgres"),
    ],
)
def test_a_command_that_needs_an_extra_names_it(
    tmp_path: Path, args: tuple[str, ...], extra: str
) -> None:
    result = _without_extras("vm_main", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "error[NOE820]" in result.stderr
    assert f"pip install 'noetlc[{extra}]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_postgres_task_without_the_extra_is_tool_unavailable(tmp_path: Path) -> None:
    playbook = tmp_path / "pg.yaml"
    playbook.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: pg, path: t/pg}\n"
        "workflow:\n  - step: start\n    tool:\n      kind: postgres\n"
        "      connection: postgresql://u@127.0.0.1:1/x\n      command: SELECT 1\n",
        encoding="utf-8",
    )
    result = _without_extras(
        "vm_main", "run", str(playbook), "--db", "memory:", "--json", cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    assert "ToolUnavailable" in result.stdout + result.stderr
    assert "noetlc[postgres]" in result.stdout + result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["status"] == "failed"
