"""`noetl-vm run catalog://PATH[@VERSION]` runs a registered playbook from the catalog of
`--db`: the latest version or the one named; a missing entry or a bad reference is exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from noetlc.cli import vm_main

REPO = Path(__file__).resolve().parents[2]


def test_run_a_catalog_entry_by_path_and_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'noetl.db'}"
    hello = (REPO / "examples" / "hello.yaml").read_text(encoding="utf-8")
    (tmp_path / "v1.yaml").write_text(hello, encoding="utf-8")
    (tmp_path / "v2.yaml").write_text(hello.replace("name: world", "name: two"), "utf-8")
    for name in ("v1.yaml", "v2.yaml"):
        assert vm_main.main(["catalog", "register", str(tmp_path / name), "--db", db]) == 0
    capsys.readouterr()

    def shout(ref: str) -> str:
        assert vm_main.main(["run", ref, "--json", "--db", db]) == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        return str(summary["steps"]["shout"]["result"]["shout"])

    assert shout("catalog://examples/hello") == "HELLO TWO"  # the latest version
    assert shout("catalog://examples/hello@1") == "HELLO WORLD"
    assert shout("catalog://examples/hello@2") == "HELLO TWO"


@pytest.mark.parametrize(
    ("ref", "code"),
    [
        ("catalog://examples/hello@9", "NOE871"),
        ("catalog://no/such", "NOE871"),
        ("catalog://examples/hello@x", "NOE800"),
        ("catalog://examples/hello@0", "NOE800"),
        ("catalog://", "NOE800"),
    ],
)
def test_a_missing_entry_or_a_bad_reference_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ref: str, code: str
) -> None:
    db = f"sqlite:///{tmp_path / 'noetl.db'}"
    assert (
        vm_main.main(["catalog", "register", str(REPO / "examples" / "hello.yaml"), "--db", db])
        == 0
    )
    capsys.readouterr()
    assert vm_main.main(["run", ref, "--db", db]) == 2
    err = capsys.readouterr().err
    assert f"error[{code}]" in err and "Traceback" not in err
    if code == "NOE871":
        assert "examples/hello" in err  # the hint names what the catalog has
