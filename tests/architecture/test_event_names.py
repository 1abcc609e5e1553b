"""Event names are spelled once: `vm/protocol.py`'s `EventName`. No other module of the VMs or
the runtimes writes an event name as a string literal (docstrings and comments aside), so a
name cannot drift between the code that records an event and the code that reads it."""

from __future__ import annotations

import ast
from pathlib import Path

from noetlc.vm.protocol import EventName

REPO = Path(__file__).resolve().parents[2]
NAMES = {name.value for name in EventName}


def bare_names(folder: Path, root: Path = REPO) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.py")):
        if path.name == "protocol.py" and path.parent.name == "vm":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and node.value in NAMES
                and id(node) not in docstrings
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    return found


def test_no_bare_event_names_in_the_vms_and_runtimes() -> None:
    found = bare_names(REPO / "vm") + bare_names(REPO / "runtime")
    assert not found, "use vm/protocol.py EventName:\n" + "\n".join(found)


def test_the_check_finds_a_bare_name(tmp_path: Path) -> None:
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "m.py").write_text('"""step.done in a docstring is fine."""\nX = "step.done"\n')
    assert bare_names(folder, tmp_path) == ["pkg/m.py:2: 'step.done'"]
