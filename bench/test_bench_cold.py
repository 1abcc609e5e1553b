"""Cold start: whole processes, as a user or a CI job meets the command line.

Run: `python -m bench -k cold`.

Each figure is the best wall time of several runs of one command in a new process (the
installed console scripts `noetlc` and `noetl-vm` beside the interpreter running the bench),
after two warm-up runs that write the bytecode caches and warm the OS page cache: what a
second invocation on a developer machine costs. `PYTHONDONTWRITEBYTECODE` is removed from the
environment of the measured processes, so imports read `.pyc` files as an installed package
does. Compared, in the same test: the floor, `python -c pass` with the same interpreter
(interpreter start-up, site and the editable-install finder included); and the NoETL CLI's
own process (`noetl --help`, installed from PyPI in its peer virtualenv, `bench/peers.py`),
skipped with the reason when the peer cannot be installed.

The compile cache (`noetlc check` and `noetl-vm run` of a `.yaml` file keep their results
between processes) gives each of `check`, `run` and the loop two rows: "empty compile cache"
(the cache folder is removed before every timed run: the compile runs and its entry is
written, what the first invocation after an edit costs) and "compile cache hit" (the entry of
the warm-up runs is read). The measured processes use a cache folder of their own, never the
user's.

The loop figure runs a 1,000-iteration noop loop (`generators.big_loop`) through `noetl-vm
run` with the default SQLite event store (a fresh database file each run): compile, load,
run, commit, summary, all in one process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from noetlc.bench import generators, peers
from noetlc.bench.figures import quick, record, target

pytestmark = pytest.mark.bench

REPO = Path(__file__).resolve().parent.parent
HELLO = REPO / "examples" / "hello.yaml"
BIN = Path(sys.executable).parent
ROUNDS = 5 if quick() else 15
FLOOR = "floor: `python -c pass` (same interpreter)"


def script(name: str) -> list[str]:
    """The console script beside the interpreter, else the module behind it."""
    path = BIN / name
    if path.exists():
        return [str(path)]
    module = "noetlc" if name == "noetlc" else "noetlc.cli.vm_main"
    return [sys.executable, "-m", module]


CACHE = Path(tempfile.mkdtemp(prefix="noetlc-bench-cache-"))


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPATH", None)
    env.pop("NOETLC_NO_CACHE", None)
    env["NOETLC_CACHE_DIR"] = str(CACHE)
    return env


def empty_cache() -> None:
    shutil.rmtree(CACHE, ignore_errors=True)


def best_seconds(
    commands: Sequence[Sequence[str]],
    rounds: int = ROUNDS,
    cwd: Path | None = None,
    cold_cache: bool = False,
) -> list[float]:
    """The best wall time of each command over `rounds` runs, after two warm-up runs. The
    commands take turns, so a busy moment of a shared machine slows all of them alike; each
    must exit 0. With `cold_cache` the compile cache is emptied before every run."""
    env = environment()
    best = [float("inf")] * len(commands)
    for i in range(rounds + 2):
        for k, argv in enumerate(commands):
            if cold_cache:
                empty_cache()
            started = time.perf_counter()
            done = subprocess.run(
                list(argv), cwd=cwd, env=env, capture_output=True, text=True, check=False
            )
            elapsed = time.perf_counter() - started
            assert done.returncode == 0, f"{' '.join(argv)}: exit {done.returncode}: {done.stderr}"
            if i >= 2:
                best[k] = min(best[k], elapsed)
    return best


PASS = [sys.executable, "-c", "pass"]


def within(bound_ms: float) -> dict[str, Any]:
    return target("value", "<=", bound_ms, f"target: ≤ {bound_ms / 1000:g} s")


def cold(
    benchmark: Any,
    figure: str,
    argv: list[str],
    goal: dict[str, Any] | None,
    cwd: Path | None = None,
    cold_cache: bool = False,
    floor_argv: Sequence[str] = PASS,
    against: str = FLOOR,
) -> None:
    """Time `argv` against the floor, taking turns, and record the figure with its target."""
    benchmark.pedantic(best_seconds, args=([argv], 1, cwd, cold_cache), rounds=1, iterations=1)
    ours, floor = best_seconds([argv, floor_argv], cwd=cwd, cold_cache=cold_cache)
    record(
        benchmark,
        figure=figure,
        value=ours * 1000,
        unit="ms",
        better="lower",
        against=against,
        against_value=floor * 1000,
        target=goal,
        group="cold",
    )


def test_cold_version(benchmark: Any) -> None:
    cold(benchmark, "cold: `noetlc --version`", [*script("noetlc"), "--version"], within(60))


CACHE_STATES = [(True, "empty compile cache"), (False, "compile cache hit")]
CACHE_IDS = ["empty-cache", "cache-hit"]


@pytest.mark.parametrize("cold_cache, state", CACHE_STATES, ids=CACHE_IDS)
def test_cold_check(benchmark: Any, cold_cache: bool, state: str) -> None:
    argv = [*script("noetlc"), "check", str(HELLO)]
    figure = f"cold: `noetlc check examples/hello.yaml`, {state}"
    cold(benchmark, figure, argv, within(150), cold_cache=cold_cache)


@pytest.mark.parametrize("cold_cache, state", CACHE_STATES, ids=CACHE_IDS)
def test_cold_run_hello(benchmark: Any, tmp_path: Path, cold_cache: bool, state: str) -> None:
    # the default store: .noetl/noetl.db under the working directory (SQLite, WAL)
    argv = [*script("noetl-vm"), "run", str(HELLO), "--quiet"]
    figure = f"cold: `noetl-vm run examples/hello.yaml` (SQLite), {state}"
    cold(benchmark, figure, argv, within(150), tmp_path, cold_cache)


@pytest.mark.parametrize("cold_cache, state", CACHE_STATES, ids=CACHE_IDS)
def test_cold_run_loop(benchmark: Any, tmp_path: Path, cold_cache: bool, state: str) -> None:
    playbook = tmp_path / "loop.yaml"
    playbook.write_text(generators.big_loop(1_000), encoding="utf-8")
    # every run starts from a fresh database file: the shell removes it, then execs the run
    # (the floor is timed the same way: the shell adds about a millisecond)
    db = tmp_path / "loop.db"
    run = [*script("noetl-vm"), "run", str(playbook), "--quiet", "--db", f"sqlite:///{db}"]
    argv = ["/bin/sh", "-c", 'rm -f "$0" "$0-wal" "$0-shm" && exec "$@"', str(db), *run]
    figure = f"cold: 1,000-iteration noop loop via `noetl-vm run` (SQLite), {state}"
    cold(benchmark, figure, argv, within(200), tmp_path, cold_cache)


def test_cold_vs_noetl_cli(benchmark: Any) -> None:
    try:
        python = peers.ensure("NoETL CLI")
    except peers.PeerUnavailable as exc:
        pytest.skip(f"NoETL CLI: {exc}")
    noetl = Path(python).parent / "noetl"
    if not noetl.exists():
        pytest.skip(f"NoETL CLI: no `noetl` script in {noetl.parent}")
    argv = [*script("noetlc"), "--help"]
    benchmark.pedantic(best_seconds, args=([argv], 1), rounds=1, iterations=1)
    with tempfile.TemporaryDirectory(prefix="noetlc-cold-") as scratch:
        ours, theirs = best_seconds([argv, [str(noetl), "--help"]], cwd=Path(scratch))
    record(
        benchmark,
        figure="cold: `noetlc --help` vs the NoETL CLI's `noetl --help`",
        value=ours * 1000,
        unit="ms",
        better="lower",
        against="NoETL CLI `noetl --help` (its own process)",
        against_value=theirs * 1000,
        fair="both print their command help from a new process, each from its own "
        "virtualenv with bytecode caches written",
        group="cold",
    )


# Instruction counts: the same commands under valgrind's callgrind, which counts the
# instructions a process executes. Unlike wall time they do not move with the load of a shared
# machine, so two runs (or two branches) compare exactly; full runs only (each command takes
# 10–40 s under valgrind).
CHECK = ["noetlc", "check", str(HELLO)]
RUN = ["noetl-vm", "run", str(HELLO), "--quiet"]
# (label, command, empty the compile cache before the counted run)
COUNTED = [
    ("`noetlc --version`", ["noetlc", "--version"], False),
    ("`noetlc check examples/hello.yaml`, empty compile cache", CHECK, True),
    ("`noetlc check examples/hello.yaml`, compile cache hit", CHECK, False),
    ("`noetl-vm run examples/hello.yaml` (SQLite), empty compile cache", RUN, True),
    ("`noetl-vm run examples/hello.yaml` (SQLite), compile cache hit", RUN, False),
]


def instructions(argv: Sequence[str], cwd: Path | None = None, cold_cache: bool = False) -> int:
    """Instructions executed by `argv` (callgrind's `Collected`), after one warm-up run (with
    `cold_cache`, the compile cache is emptied after it)."""
    env = environment()
    subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, check=True)
    if cold_cache:
        empty_cache()
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    for line in done.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1])
    raise AssertionError(f"no instruction count from valgrind: {done.stderr[-300:]}")


@pytest.mark.parametrize(
    "label, command, cold_cache",
    COUNTED,
    ids=[c[1][1] + ("-empty-cache" if c[2] else "") for c in COUNTED],
)
def test_cold_instructions(
    benchmark: Any, label: str, command: list[str], cold_cache: bool, tmp_path: Path
) -> None:
    if quick():
        pytest.skip("instruction counts: full runs only (valgrind is slow)")
    if shutil.which("valgrind") is None:
        pytest.skip("instruction counts: valgrind is not installed")
    argv = [*script(command[0]), *command[1:]]
    ours = benchmark.pedantic(
        instructions, args=(argv, tmp_path, cold_cache), rounds=1, iterations=1
    )
    floor = instructions(PASS)
    record(
        benchmark,
        figure=f"cold: {label}, instructions (callgrind)",
        value=ours / 1e6,
        unit="M instructions",
        better="lower",
        against="floor: `python -c pass`, instructions",
        against_value=floor / 1e6,
        group="cold",
    )
