"""schemathesis (`st run --checks all`) against a real `noetl-vm serve`, embedded and
distributed: zero failures of any check. What JSON Schema cannot state is configured, with its
reason, in schemathesis.toml beside this file. The output and the counts per check of each mode
are written to the test artifacts folder (`schemathesis-<mode>.txt`, `.json`). 10 examples per
operation by default (about 1,900 test cases per mode); `NOETLC_SCHEMATHESIS_EXAMPLES=200` for
a longer run (about 8,400)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from noetlc.runtime.credentials import new_key
from noetlc.service.serving import Served, artifacts_dir
from noetlc.service.testing import TOKEN

pytestmark = pytest.mark.slow

CONFIG = Path(__file__).with_name("schemathesis.toml")


def served(mode: str, tmp_path: Path) -> Iterator[Served]:
    if mode == "embedded":
        server = Served(f"sqlite:///{tmp_path / 'noetl.db'}", tmp_path, new_key(), TOKEN)
        try:
            yield server
        finally:
            server.stop()
        return
    from noetlc.runtime.postgres.cluster_testing import Cluster
    from noetlc.runtime.postgres.testing import schema_or_skip

    for url in schema_or_skip():
        cluster = Cluster(url, tmp_path)
        cluster.server(2.0, 0.2)
        cluster.worker(2)
        server = Served(url, tmp_path, new_key(), TOKEN)
        try:
            yield server
        finally:
            server.stop()
            cluster.stop()


def counts_per_check(ndjson: Path) -> dict[str, dict[str, int]]:
    """{check: {"success": n, "failure": n, ...}} over every scenario of the run."""
    counts: dict[str, Counter[str]] = {}
    for line in ndjson.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        finished = event.get("ScenarioFinished")
        if not finished:
            continue
        for results in (finished["recorder"].get("checks") or {}).values():
            for result in results:
                counts.setdefault(result["name"], Counter())[result["status"]] += 1
    return {name: dict(c) for name, c in sorted(counts.items())}


@pytest.mark.parametrize("mode", ["embedded", "distributed"])
def test_schemathesis_finds_nothing(mode: str, tmp_path: Path) -> None:
    st = Path(sys.executable).with_name("schemathesis")
    if not st.exists():
        pytest.skip("schemathesis is not installed (the dev extras)")
    for server in served(mode, tmp_path):
        report = tmp_path / "st.ndjson"
        command = [
            str(st),
            "--config-file",
            str(CONFIG),
            "run",
            f"{server.url}/openapi.json",
            "--checks",
            "all",
            "-H",
            f"Authorization: Bearer {TOKEN}",
            "--max-examples",
            os.environ.get("NOETLC_SCHEMATHESIS_EXAMPLES", "10"),
            "--phases",
            "examples,coverage,fuzzing",
            "--seed",
            "1",
            "--no-color",
            "--report",
            "ndjson",
            "--report-ndjson-path",
            str(report),
        ]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=900,
            cwd=tmp_path,
            env={**os.environ, "NO_COLOR": "1"},
        )
        out = artifacts_dir()
        (out / f"schemathesis-{mode}.txt").write_text(result.stdout + result.stderr)
        counts = counts_per_check(report)
        (out / f"schemathesis-{mode}.json").write_text(json.dumps(counts, indent=2))
        assert result.returncode == 0, result.stdout[-4000:]
        assert counts and all("failure" not in c for c in counts.values()), counts
        for check in ("not_a_server_error", "response_schema_conformance"):
            assert counts[check].get("success", 0) > 100, counts
