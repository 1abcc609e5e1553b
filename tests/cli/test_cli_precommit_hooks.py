"""`.pre-commit-hooks.yaml` offers `noetlc check` and `noetlc lint` to NoETL repositories: the
entries are real commands of this package, their file patterns pick playbooks, and each
hook's entry exits as pre-commit needs (0 for good files, non-zero for a broken one)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from noetlc.cli import noetlc_main

REPO = Path(__file__).resolve().parents[2]


def _hooks() -> list[dict[str, object]]:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert isinstance(hooks, list)
    return hooks


def test_the_hooks_are_check_and_lint_on_playbook_files() -> None:
    hooks = {h["id"]: h for h in _hooks()}
    assert set(hooks) == {"noetlc-check", "noetlc-lint"}
    commands = {name for name, _m, _h in noetlc_main.COMMANDS}
    for hook in hooks.values():
        program, command = shlex.split(str(hook["entry"]))
        assert program == "noetlc" and command in commands
        assert hook["language"] == "python" and hook["types"] == ["yaml"]
        pattern = re.compile(str(hook["files"]))
        assert pattern.search("playbooks/etl/load.yaml")
        assert pattern.search("tests/fixtures/playbooks/a/b.yml")
        assert not pattern.search("k8s/deployment.yaml")
        assert not pattern.search("playbooks/README.md")


@pytest.mark.parametrize("hook", ["noetlc-check", "noetlc-lint"])
def test_each_entry_passes_good_playbooks_and_fails_a_broken_one(
    hook: str, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = next(h["entry"] for h in _hooks() if h["id"] == hook)
    command = shlex.split(str(entry))[1:]
    good = [str(REPO / "examples" / "hello.yaml"), str(REPO / "examples" / "loop.yaml")]
    assert noetlc_main.main([*command, *good]) == 0
    broken = str(REPO / "tests" / "fixtures" / "readme" / "typos.yaml")
    assert noetlc_main.main([*command, *good, broken]) != 0
    capsys.readouterr()
