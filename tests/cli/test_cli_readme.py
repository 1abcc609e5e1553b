"""The README shows what the commands really print: the diagnostics of
tests/fixtures/readme/typos.yaml (three typos, one run) between the readme-check markers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_readme_check_example_is_the_real_output() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(
        r"<!-- readme-check:begin -->\n```\n(.*?)```\n<!-- readme-check:end -->", readme, re.S
    )
    assert block is not None, "README.md has no readme-check block"
    result = subprocess.run(
        [sys.executable, "-m", "noetlc", "check", "--no-cache", "tests/fixtures/readme/typos.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    # stdout (the diagnostics) then stderr (the summary line), as a terminal shows them
    assert block.group(1) == result.stdout + result.stderr, (
        "paste the output of `noetlc check tests/fixtures/readme/typos.yaml` into README.md"
    )
    assert result.stdout.count("error[") + result.stdout.count("warning[") == 3


def test_the_readme_playbook_is_examples_hello() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    hello = (REPO / "examples" / "hello.yaml").read_text(encoding="utf-8")
    assert f"```yaml\n{hello}```" in readme
    assert len(hello.splitlines()) <= 16
