"""`python -m bench`: run every benchmark, write one JSON file, print the table.

    python -m bench [--quick] [--json OUT] [-k EXPR] [--no-peers]
    python -m bench compare A.json B.json        # markdown table of the differences
    python -m bench table RESULT.json [--readme docs/performance.md | --print]

Running: installs the peers first (each in its own virtualenv, concurrently; a peer that
cannot be installed is skipped with the reason), then runs pytest on every
`bench/test_bench_*.py` with `-m bench --benchmark-enable --benchmark-json`, collects the
figures (bench/figures.py) into the result file and prints them. The pytest output goes to a
log file next to the result. Exit status: 0 when every benchmark ran or was skipped, 1 when
one failed, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from noetlc.bench import peers
from noetlc.bench.conftest import OUTCOMES_ENV
from noetlc.bench.figures import QUICK_ENV
from noetlc.bench.machine import describe
from noetlc.bench.report import ReadmeError, compare_markdown, readme_section, terminal_table
from noetlc.bench.report import update_readme as replace_section
from noetlc.bench.results import collect

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "compare":
        return _compare(args[1:])
    if args and args[0] == "table":
        return _table(args[1:])
    return _run(args)


def _run(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description="Run every benchmark.")
    p.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds (< 5 min)")
    p.add_argument("--json", metavar="OUT", help="the result file (default: .benchmarks/…)")
    p.add_argument("-k", metavar="EXPR", help="only benchmarks matching (pytest -k)")
    p.add_argument("--no-peers", action="store_true", help="skip SpiffWorkflow, Prefect, …")
    args = p.parse_args(argv)
    started = time.time()
    load_before = describe()["load_average"]
    stamp = datetime.fromtimestamp(started, UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(
        args.json
        or REPO / ".benchmarks" / f"bench-{'quick' if args.quick else 'full'}-{stamp}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(["python -m bench", *argv])
    env = {**os.environ, QUICK_ENV: "1" if args.quick else "0"}
    if args.no_peers:
        env["NOETLC_BENCH_PEERS"] = "0"
    elif args.k is None or "peer" in args.k or "embedded" in args.k:
        os.environ.update(env)
        print("peers: installing (once, each in .bench-venvs/)…", file=sys.stderr, flush=True)
        for name, state in peers.ensure_all().items():
            print(f"  {name}: {state}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="noetlc-bench-") as scratch:
        raw = Path(scratch) / "pytest-benchmark.json"
        outcomes = Path(scratch) / "outcomes.jsonl"
        env[OUTCOMES_ENV] = str(outcomes)
        log = out.with_suffix(".log")
        code = _pytest(args, raw, env, log)
        data = json.loads(raw.read_text(encoding="utf-8")) if raw.exists() else {}
        lines = outcomes.read_text(encoding="utf-8").splitlines() if outcomes.exists() else []
    result = collect(data, [json.loads(line) for line in lines])
    result.update(
        command=command,
        quick=args.quick,
        started=datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%d %H:%M UTC"),
        duration_s=round(time.time() - started, 1),
        machine={**describe(), "load_average_before": load_before},
    )
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(terminal_table(result))
    print(f"\nresult: {out}  (pytest log: {log}; {result['duration_s']:.0f} s)")
    failed = any(o["outcome"] == "failed" for o in result["outcomes"])
    return 1 if failed or code not in (0, 5) else 0


def _pytest(args: argparse.Namespace, raw: Path, env: dict[str, str], log: Path) -> int:
    cmd = [
        sys.executable, "-m", "pytest", str(BENCH), "-m", "bench", "--benchmark-enable",
        f"--benchmark-json={raw}", "-p", "no:cacheprovider", "-q", "-rs",
        "--benchmark-sort=fullname", "--benchmark-columns=min,median,rounds",
    ]  # fmt: skip
    if args.quick:
        cmd += ["--benchmark-max-time=0.2", "--benchmark-min-rounds=3", "--benchmark-warmup=off"]
    if args.k:
        cmd += ["-k", args.k]
    with log.open("w", encoding="utf-8") as f:
        done = subprocess.run(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT)
    tail = log.read_text(encoding="utf-8").strip().splitlines()[-1:]
    print(f"pytest: {' '.join(tail)}", file=sys.stderr)
    return done.returncode


def _load(path: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"python -m bench: error: cannot read {path}: {exc}") from None
    if data.get("schema") != 1 or "figures" not in data:
        raise SystemExit(f"python -m bench: error: {path} is not a result of python -m bench")
    return data


def _compare(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench compare")
    p.add_argument("a", metavar="A.json")
    p.add_argument("b", metavar="B.json")
    args = p.parse_args(argv)
    a, b = _load(args.a), _load(args.b)
    print(compare_markdown(a, b, (Path(args.a).name, Path(args.b).name)), end="")
    return 0


def _table(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench table")
    p.add_argument("result", metavar="RESULT.json")
    p.add_argument(
        "--readme",
        default=str(REPO / "docs" / "performance.md"),
        help="rewrite this file's section (default docs/performance.md)",
    )
    p.add_argument("--print", action="store_true", help="print the section instead")
    args = p.parse_args(argv)
    result = _load(args.result)
    source = Path(args.result).resolve()
    shown = source.relative_to(REPO).as_posix() if source.is_relative_to(REPO) else str(source)
    section = readme_section(result, shown)
    if args.print:
        print(section)
        return 0
    readme = Path(args.readme)
    try:
        readme.write_text(replace_section(readme.read_text(encoding="utf-8"), section), "utf-8")
    except (OSError, ReadmeError) as exc:
        print(f"python -m bench table: error: {exc}", file=sys.stderr)
        return 2
    print(f"updated {readme}")
    return 0
