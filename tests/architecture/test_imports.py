"""The import rules of the package that import-linter cannot express.

Layers and module cycles are import-linter contracts (pyproject.toml, `make lint`). Here: no
module imports a private name (`_x`) of another module, so what a module keeps to itself can
change without breaking a caller.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# "noetlc" itself and every folder setuptools maps into it (package-dir in pyproject.toml)
PACKAGE_FOLDERS = sorted(
    set(
        tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
            "package-dir"
        ].values()
    )
    - {"bench"}
)


def private_imports(folder: Path, root: Path = REPO) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("noetlc"):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(
                        f"{path.relative_to(root)}:{node.lineno}: {node.module}.{alias.name}"
                    )
    return found


def test_no_module_imports_a_private_name_of_another() -> None:
    found = [line for folder in PACKAGE_FOLDERS for line in private_imports(REPO / folder)]
    assert found == [], "\n".join(found)


def test_the_check_finds_a_private_import(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("from noetlc.runtime.server import _warn\n", encoding="utf-8")
    (tmp_path / "ok.py").write_text("from noetlc.runtime.server import Server\n", encoding="utf-8")
    assert private_imports(tmp_path, tmp_path) == ["m.py:1: noetlc.runtime.server._warn"]
