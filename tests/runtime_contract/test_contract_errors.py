"""The user-fixable errors of every layer share one shape (`noetlc.diagnostics.errors.UserError`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from noetlc.diagnostics.errors import UserError
from noetlc.runtime.event_store import StoreError
from noetlc.runtime.postgres.errors import DatabaseError
from noetlc.runtime.store_url import open_store
from noetlc.stdlib_tools.keychain import Keychain, KeychainError

SUBCLASSES = [StoreError, DatabaseError, KeychainError]


@pytest.mark.parametrize("cls", SUBCLASSES)
def test_each_layer_error_is_a_user_error(cls: type[UserError]) -> None:
    with_hint = cls("NOE805", "cannot reach it", "start it")
    assert isinstance(with_hint, UserError) and isinstance(with_hint, Exception)
    assert (with_hint.code, str(with_hint), with_hint.hint) == (
        "NOE805",
        "cannot reach it",
        "start it",
    )
    assert with_hint.render() == "error[NOE805]: cannot reach it\n  hint: start it"
    assert cls("NOE805", "cannot reach it").render() == "error[NOE805]: cannot reach it"


def test_raised_errors_are_caught_as_user_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no .noetl/keychain.yaml to read
    with pytest.raises(UserError) as store:
        open_store("mysql://x")
    assert type(store.value) is StoreError and store.value.code.startswith("NOE8")
    with pytest.raises(UserError) as keychain:
        Keychain([{"name": "absent_entry", "kind": "bearer"}], env={}).resolve("absent_entry")
    assert type(keychain.value) is KeychainError and keychain.value.code == "NOE812"


# the exit code of each class (the table of cli/common.py): the store or database cannot be
# used (5), a keychain file named by an option cannot be used (2), anything else 1
EXIT_FOR = {StoreError: 5, DatabaseError: 5, KeychainError: 2, UserError: 1}


@pytest.mark.parametrize("cls", [*SUBCLASSES, UserError])
def test_the_command_lines_print_a_user_error_once_with_its_exit_code(
    cls: type[UserError], capsys: pytest.CaptureFixture[str]
) -> None:
    from noetlc.cli.common import run_guarded

    def command() -> int:
        raise cls("NOE807", "refused", "check the user")

    assert run_guarded(command) == EXIT_FOR[cls]
    captured = capsys.readouterr()
    assert captured.err == "error[NOE807]: refused\n  hint: check the user\n"
    assert captured.out == ""


def test_a_keychain_error_from_run_is_printed_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from noetlc.cli import vm_main as cli
    from noetlc.stdlib_tools.keychain import load_file

    bad = tmp_path / "keys.yaml"
    bad.write_text("- not a mapping\n")
    playbook = tmp_path / "p.yaml"
    playbook.write_text(
        "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p, path: t/p}\n"
        "workflow:\n  - step: start\n    tool: {kind: noop}\n"
    )
    with pytest.raises(KeychainError) as expected:
        load_file(bad)
    capsys.readouterr()
    assert cli.main(["run", str(playbook), "--db", "memory:", "--keychain", str(bad)]) == 2
    assert capsys.readouterr().err == expected.value.render() + "\n"
