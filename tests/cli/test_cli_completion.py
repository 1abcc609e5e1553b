"""Shell completion from the parsers: `noetlc completion bash` and `noetl-vm completion bash`
are run in a real bash (the completion function called as bash calls it); zsh is the same
script behind bashcompinit; fish gets `complete` lines with each option's choices."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from noetlc.cli import noetlc_main, vm_main

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")


def _script(main: object, prog: str, shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main.main(["completion", shell]) == 0  # type: ignore[attr-defined]
    return capsys.readouterr().out


def _complete(script: str, tmp_path: Path, *words: str) -> list[str]:
    """What the completion offers for the command line `words` (the last one being typed)."""
    (tmp_path / "script.bash").write_text(script, encoding="utf-8")
    fn = script.split("\n")[1].split("(")[0]
    quoted = " ".join(f"'{w}'" for w in words)
    probe = (
        f"source script.bash; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
        f'{fn}; printf "%s\\n" "${{COMPREPLY[@]}}"'
    )
    out = subprocess.run(
        ["bash", "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    return sorted(line for line in out.splitlines() if line)


def test_noetlc_bash_completes_commands_options_and_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(noetlc_main, "noetlc", "bash", capsys)
    assert "check" in _complete(script, tmp_path, "noetlc", "")
    assert _complete(script, tmp_path, "noetlc", "ch") == ["check"]
    assert "--format" in _complete(script, tmp_path, "noetlc", "check", "--f")
    assert _complete(script, tmp_path, "noetlc", "check", "--format", "") == [
        "json",
        "sarif",
        "text",
    ]
    assert _complete(script, tmp_path, "noetlc", "graph", "--format", "") == [
        "dot",
        "mermaid",
        "pnml",
        "promela",
    ]
    (tmp_path / "play.yaml").write_text("", encoding="utf-8")
    assert _complete(script, tmp_path, "noetlc", "check", "pl") == ["play.yaml"]


def test_noetl_vm_bash_completes_nested_actions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(vm_main, "noetl-vm", "bash", capsys)
    assert _complete(script, tmp_path, "noetl-vm", "db", "") == ["status", "upgrade"]
    assert "--source" in _complete(script, tmp_path, "noetl-vm", "catalog", "show", "--")
    assert "--poll" in _complete(script, tmp_path, "noetl-vm", "server", "--p")
    assert _complete(script, tmp_path, "noetl-vm", "run", "x.yaml", "--d") == ["--db"]


def test_every_command_is_in_the_scripts(capsys: pytest.CaptureFixture[str]) -> None:
    for main, prog in ((noetlc_main, "noetlc"), (vm_main, "noetl-vm")):
        zsh = _script(main, prog, "zsh", capsys)
        fish = _script(main, prog, "fish", capsys)
        assert zsh.startswith("autoload -U +X bashcompinit && bashcompinit\n")
        for name, _module, _help in main.COMMANDS:  # type: ignore[attr-defined]
            assert f" -a {name} -d " in fish
            assert f"    {name}) opts=" in zsh
    assert "-l format -xa 'text json sarif'" in _script(noetlc_main, "noetlc", "fish", capsys)
