"""The harness of `python -m bench` on a fixture: figures collected from pytest-benchmark's
JSON, the comparison of two runs, the README section. No timings are taken here."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from noetlc.bench import cli
from noetlc.bench.figures import record, target
from noetlc.bench.report import (
    BEGIN,
    END,
    ReadmeError,
    compare_markdown,
    machine_line,
    readme_section,
    terminal_table,
    update_readme,
)
from noetlc.bench.results import collect, group_of, unmet

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
OUTCOMES = [
    {"test": "bench/test_bench_peers.py::test_peer[Prefect]", "outcome": "skipped",
     "reason": "Prefect: installing prefect failed: no network"},
    {"test": "bench/test_bench_peers.py::test_peer[x]", "outcome": "passed", "reason": ""},
]  # fmt: skip


def fixture_result() -> dict[str, Any]:
    raw = json.loads((HERE / "pytest_benchmark_fixture.json").read_text(encoding="utf-8"))
    result = collect(raw, OUTCOMES)
    result.update(
        command="python -m bench --quick",
        started="2025-01-01 00:00 UTC",
        duration_s=120.0,
        machine={"cpu": "Fixture CPU", "cores": 2, "memory_gib": 24.0,
                 "python": "CPython 3.11.7", "platform": "Linux 6"},
    )  # fmt: skip
    return result


def by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["figure"]: f for f in result["figures"]}


def test_collect_reads_both_conventions_and_computes_ratio_and_targets() -> None:
    result = fixture_result()
    figures = by_name(result)
    assert list(figures) == [
        "1,000-iteration noop loop, in-memory log",
        "1,000-iteration noop loop, SQLite log",
        "control VM firings/s",
        "100-step noop chain vs SpiffWorkflow",
        "compile chain, 100 steps",
    ]
    sqlite = figures["1,000-iteration noop loop, SQLite log"]
    assert sqlite["group"] == "embedded"  # from the module name
    assert sqlite["ratio"] == pytest.approx(80 / 9)
    assert sqlite["met"] is False
    assert figures["1,000-iteration noop loop, in-memory log"]["met"] is True
    firings = figures["control VM firings/s"]  # single-figure form, ratio target
    assert firings["ratio"] == 0.5 and firings["met"] is True and firings["better"] == "higher"
    assert figures["100-step noop chain vs SpiffWorkflow"]["met"] is None
    assert [b["test"].rsplit("::", 1)[1] for b in result["benchmarks"]][-1] == "test_lint[x]"
    assert [o["outcome"] for o in result["outcomes"]] == ["skipped"]
    assert [f["figure"] for f in unmet(result)] == ["1,000-iteration noop loop, SQLite log"]


def test_group_of() -> None:
    assert group_of("bench/test_bench_pg_queue.py::test_x[1-2]") == "pg_queue"


def test_record_follows_the_convention() -> None:
    class Fake:
        def __init__(self) -> None:
            self.extra_info: dict[str, Any] = {}

    fake = Fake()
    entry = record(fake, figure="x", value=3.0, unit="ms", against="y", against_value=2.0,
                   target=target("ratio", "<=", 3, "≤ 3×"), fair="note")  # fmt: skip
    assert fake.extra_info["figures"] == [entry]
    assert entry["ratio"] == 1.5 and entry["fair"] == "note" and "group" not in entry
    with pytest.raises(ValueError):
        record(fake, figure="x", value=1.0, unit="ms", better="up")
    with pytest.raises(ValueError):
        target("value", "=", 1, "")


def test_terminal_table_lists_figures_outcomes_and_unmet_targets() -> None:
    text = terminal_table(fixture_result())
    assert "1,000-iteration noop loop, SQLite log" in text
    assert "8.89 (8.89× slower)" in text
    assert "0.2 (5× faster)" in text  # 10 ms against SpiffWorkflow's 50 ms
    assert "skipped: bench/test_bench_peers.py::test_peer[Prefect]" in text
    assert "targets not met: 1" in text


def test_compare_markdown() -> None:
    a = fixture_result()
    b = copy.deepcopy(a)
    figures = by_name(b)
    figures["1,000-iteration noop loop, SQLite log"]["value"] = 40.0  # better
    figures["control VM firings/s"]["value"] = 250_000  # worse (higher is better)
    b["figures"] = [f for f in b["figures"] if f["figure"] != "compile chain, 100 steps"]
    b["figures"].append({**figures["control VM firings/s"], "figure": "new one"})
    rows = compare_markdown(a, b, ("a.json", "b.json")).splitlines()
    assert rows[0].startswith("| group | figure | unit | A: a.json | B: b.json | B/A |")
    row = {r.split(" | ")[1]: r for r in rows[2:]}
    assert row["1,000-iteration noop loop, SQLite log"].endswith("| 80.0 | 40.0 | 0.500 | better |")
    assert row["control VM firings/s"].endswith("| 0.500 | worse |")
    assert row["1,000-iteration noop loop, in-memory log"].endswith("| same (±5%) |")
    assert row["compile chain, 100 steps"].endswith("| only in A |")
    assert row["new one"].endswith("| only in B |")


def test_machine_line_reports_the_load() -> None:
    machine = {"cpu": "C", "cores": 2, "memory_gib": 1.0, "python": "P", "platform": "L"}
    assert machine_line(machine) == "C, 2 cores, 1.0 GiB, P on L"
    loaded = {**machine, "load_average_before": 3.5, "load_average": 4.0}
    assert machine_line(loaded).endswith("(1-minute load average 3.5 before the run, 4.0 after)")


def test_readme_section_and_replacement() -> None:
    section = readme_section(fixture_result(), "bench/results/x.json")
    assert section.startswith(BEGIN) and section.endswith(END)
    assert "`python -m bench --quick`" in section and "Fixture CPU, 2 cores, 24.0 GiB" in section
    assert "| 100-step noop chain vs SpiffWorkflow [1] | 10.0 ms | SpiffWorkflow 3.2.0 |" in section
    assert "[1] fair: both \\| interpret" in section
    assert "| chain, 100 steps | 10.0 | 30.0 |" in section  # the per-pass table
    assert "* `bench/test_bench_peers.py::test_peer[Prefect]` (skipped)" in section
    assert "Targets not met in this run: 1." in section
    readme = f"# x\n\nbefore\n{BEGIN}\nold\n{END}\nafter\n"
    updated = update_readme(readme, section)
    assert "old" not in updated and updated.startswith("# x\n\nbefore\n" + BEGIN)
    assert updated.endswith(END + "\nafter\n")
    assert update_readme(updated, section) == updated  # idempotent
    with pytest.raises(ReadmeError):
        update_readme("# no markers\n", section)


def test_cli_table_and_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result_path = tmp_path / "r.json"
    result_path.write_text(json.dumps(fixture_result()), encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{BEGIN}\n{END}\n", encoding="utf-8")
    assert cli.main(["table", str(result_path), "--readme", str(readme)]) == 0
    assert "control VM firings/s" in readme.read_text(encoding="utf-8")
    bare = tmp_path / "bare.md"
    bare.write_text("no markers\n", encoding="utf-8")
    assert cli.main(["table", str(result_path), "--readme", str(bare)]) == 2
    assert "markers" in capsys.readouterr().err
    assert cli.main(["compare", str(result_path), str(result_path)]) == 0
    assert "| same (±5%) |" in capsys.readouterr().out
    other = tmp_path / "other.json"
    other.write_text("{}", encoding="utf-8")
    with pytest.raises(SystemExit, match="not a result of python -m bench"):
        cli.main(["compare", str(result_path), str(other)])


def test_python_m_bench_runs_from_the_repository_root(tmp_path: Path) -> None:
    result_path = tmp_path / "r.json"
    result_path.write_text(json.dumps(fixture_result()), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "bench", "table", str(result_path), "--print"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(BEGIN)
