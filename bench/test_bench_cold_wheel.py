"""Cold start of the installed wheel: what a user who ran `pip install noetlc` meets.

Run: `python -m bench -k cold_wheel`.

The rows of `test_bench_cold.py` run the console scripts of the development checkout, whose
interpreter also starts the editable-install finder and every `.pth` file of the dev
dependencies (`python -c pass` costs 20–30 ms there). Here the wheel is built from the checkout
(`pip wheel --no-deps`) and installed with its dependencies into a virtualenv of its own
(`.bench-venvs/noetlc-wheel`, rebuilt when the wheel's bytes change); every command runs in
that virtualenv, and each ratio is against `python -c pass` of the same interpreter, timed in
turns with it (best of several runs after two warm-ups, bytecode caches written).

A second floor says what no code of ours can remove: the same interpreter importing only the
modules a compile-cache-hit `noetl-vm run examples/hello.yaml` imports that are not ours
(the standard library, sqlite3, msgpack, orjson; the list is read from such a run, not
written here). The targets are the ratios users feel: a cached run ≤ 4× `python -c pass`, an
empty compile cache ≤ 6×, `noetlc check` ≤ 3×.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from noetlc.bench import peers
from noetlc.bench.figures import target
from noetlc.bench.test_bench_cold import HELLO, REPO, cold, environment

pytestmark = pytest.mark.bench

FLOOR = "floor: `python -c pass` (the wheel's virtualenv)"


@pytest.fixture(scope="module")
def wheel_bin() -> Path:
    """The `bin/` of a virtualenv with the checkout's wheel installed (skips with the reason
    when it cannot be built or installed here)."""
    venv = peers.venv_root() / "noetlc-wheel"
    with tempfile.TemporaryDirectory(prefix="noetlc-wheel-") as scratch:
        built = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", scratch, str(REPO)],
            capture_output=True,
            text=True,
            check=False,
        )
        wheels = list(Path(scratch).glob("noetlc-*.whl"))
        if built.returncode != 0 or not wheels:
            pytest.skip(f"cannot build the wheel: {built.stderr.strip()[-300:]}")
        digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
        marker = venv / ".noetlc-bench-wheel"
        if marker.exists() and marker.read_text(encoding="utf-8") == digest:
            return venv / "bin"
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        steps = [
            [sys.executable, "-m", "venv", str(venv)],
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheels[0])],
        ]
        for argv in steps:
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                pytest.skip(f"cannot install the wheel: {done.stderr.strip()[-300:]}")
        marker.write_text(digest, encoding="utf-8")
    return venv / "bin"


def run_argv(bin_dir: Path) -> list[str]:
    # the default store, .noetl/noetl.db under the working directory, as `test_bench_cold.py`
    # times it: a second invocation in the same folder
    return [str(bin_dir / "noetl-vm"), "run", str(HELLO), "--quiet"]


FOREIGN_MODULES = """
import runpy, sys
sys.argv = {argv!r}
try:
    runpy.run_module("noetlc.cli.vm_main", run_name="__main__")
except SystemExit:
    pass
names = sorted(n for n in sys.modules if n.split(".")[0] != "noetlc")
sys.__stdout__.write("\\n" + __import__("json").dumps(names))
"""


def foreign_modules(bin_dir: Path, db: Path) -> list[str]:
    """The modules a cache-hit run imports that are not ours (the second of two runs: the
    first writes the compile cache)."""
    argv = ["noetl-vm", "run", str(HELLO), "--quiet", "--db", f"sqlite:///{db}"]
    for _ in range(2):
        done = subprocess.run(
            [str(bin_dir / "python"), "-c", FOREIGN_MODULES.format(argv=argv)],
            cwd=db.parent,  # not the checkout: its `noetlc/` folder would shadow the wheel
            env=environment(),
            capture_output=True,
            text=True,
            check=True,
        )
    names: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    # `__main__` and the interpreter's own start-up modules are imported by `pass` too
    return [n for n in names if n not in ("__main__",) and not n.startswith("_frozen")]


def wheel_row(benchmark: Any, figure: str, argv: list[str], bin_dir: Path, **kw: Any) -> None:
    bound = kw.pop("bound")
    goal = None if bound is None else target("ratio", "<=", bound, f"target: ≤ {bound:g}×")
    passes = [str(bin_dir / "python"), "-c", "pass"]
    cold(benchmark, figure, argv, goal, floor_argv=passes, against=FLOOR, **kw)


CASES = [
    ("`noetl-vm run examples/hello.yaml` (SQLite), compile cache hit", "run", False, 4.0),
    ("`noetl-vm run examples/hello.yaml` (SQLite), empty compile cache", "run", True, 6.0),
    ("`noetlc check examples/hello.yaml`, compile cache hit", "check", False, 3.0),
    ("`noetlc check examples/hello.yaml`, empty compile cache", "check", True, 3.0),
]


@pytest.mark.parametrize(
    "label, command, cold_cache, bound",
    CASES,
    ids=["run-cache-hit", "run-empty-cache", "check-cache-hit", "check-empty-cache"],
)
def test_cold_wheel(
    benchmark: Any,
    wheel_bin: Path,
    tmp_path: Path,
    label: str,
    command: str,
    cold_cache: bool,
    bound: float,
) -> None:
    if command == "run":
        argv = run_argv(wheel_bin)
    else:
        argv = [str(wheel_bin / "noetlc"), "check", str(HELLO)]
    figure = f"cold, wheel install: {label}"
    wheel_row(benchmark, figure, argv, wheel_bin, cwd=tmp_path, cold_cache=cold_cache, bound=bound)


def test_cold_wheel_import_floor(benchmark: Any, wheel_bin: Path, tmp_path: Path) -> None:
    names = foreign_modules(wheel_bin, tmp_path / "floor.db")
    # a name the run's interpreter holds but `import` cannot load again (an alias) is passed
    imports = f"for n in {names!r}:\n try: __import__(n)\n except ImportError: pass"
    argv = [str(wheel_bin / "python"), "-c", imports]
    figure = (
        f"cold, wheel install: importing only the {len(names)} modules not ours "
        "that a cached `noetl-vm run` imports"
    )
    wheel_row(benchmark, figure, argv, wheel_bin, cwd=tmp_path, bound=None)
