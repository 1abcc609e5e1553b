"""Cold start: `noetl-vm run` imports only what the playbook needs.

A playbook of python and noop steps whose expressions are on the compiled path runs on the
embedded loop thread: no asyncio (which drags in ssl, `concurrent.futures` and logging), and
no jinja2 (its expressions read defined values and call no filter). The
run happens in a fresh interpreter, twice (compile cache miss, then hit), and the modules it
loaded are read from `sys.modules` at exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: cold, path: tests/cold}
workload: {name: world, items: [1, 2]}
workflow:
  - step: start
    tool: {kind: noop}
    next: greet
  - step: greet
    tool:
      kind: python
      input: {name: "{{ workload.name }}"}
      code: |
        result = {"greeting": "hello " + name}
    next: each
  - step: each
    loop: {in: "{{ workload.items }}", iterator: item}
    tool:
      kind: python
      input: {n: "{{ item }}"}
      code: |
        result = {"n": n}
    next: end
  - step: end
    tool: {kind: noop}
"""

# Probe: run the CLI in this interpreter, then list what it imported.
PROBE = """\
import json, sys
from noetlc.cli.vm_main import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""

# Never needed by such a playbook: the asyncio event loop and what it imports.
UNWANTED = ("asyncio", "ssl", "_ssl", "concurrent.futures", "uvloop", "logging", "jinja2")


def probed(tmp_path: Path, probe: str, name: str, *argv: str) -> tuple[list[str], str]:
    """Run a command line in a fresh interpreter through `probe`; the modules it loaded and
    its output. The compile cache is the test's own folder (kept between calls)."""
    dump = tmp_path / f"{name}.json"
    env = {**os.environ, "NOETLC_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("NOETLC_NO_CACHE", None)
    done = subprocess.run(
        [sys.executable, "-c", probe, str(dump), *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(dump.read_text())
    assert data["code"] == 0, done.stdout + done.stderr
    modules: list[str] = data["modules"]
    return modules, done.stdout


def loaded_modules(tmp_path: Path, playbook: Path, name: str) -> list[str]:
    db = f"sqlite:///{tmp_path / 'noetl.db'}"
    modules, out = probed(tmp_path, PROBE, name, "run", str(playbook), "--db", db)
    assert "completed" in out
    return modules


@pytest.mark.parametrize("cache", ["miss", "hit"])
def test_run_imports_no_event_loop(tmp_path: Path, cache: str) -> None:
    playbook = tmp_path / "cold.yaml"
    playbook.write_text(PLAYBOOK)
    if cache == "hit":
        loaded_modules(tmp_path, playbook, "warm-up")
    modules = set(loaded_modules(tmp_path, playbook, cache))
    assert "noetlc.runtime.embedded" in modules  # the probe really ran the embedded runtime
    assert sorted(m for m in UNWANTED if m in modules) == []


CHECK_PROBE = """\
import json, sys
from noetlc.cli.noetlc_main import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""

# A compile cache hit of `noetlc check` prints the stored diagnostics: no compiler (PyYAML,
# pydantic), no `dataclasses` (with inspect, ast, dis: the largest import it had), no difflib.
CHECK_HIT_UNWANTED = ("yaml", "pydantic", "dataclasses", "inspect", "difflib", "jinja2")


def test_check_cache_hit_imports_no_compiler(tmp_path: Path) -> None:
    playbook = tmp_path / "cold.yaml"
    playbook.write_text(PLAYBOOK)
    miss, _ = probed(tmp_path, CHECK_PROBE, "check-miss", "check", str(playbook))
    hit, _ = probed(tmp_path, CHECK_PROBE, "check-hit", "check", str(playbook))
    assert "yaml" in miss  # the first run compiled: the probe sees what a compile imports
    assert sorted(m for m in CHECK_HIT_UNWANTED if m in hit) == []
