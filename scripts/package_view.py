"""A symlink view `<ROOT>/<name>/noetlc/<subpackage>` of the source tree, for tools that find a
package's modules by walking its folder (mypy, import-linter).

Our folders (`compiler/`, `vm/`, ...) are installed under `noetlc.` with setuptools'
`package-dir` (pyproject.toml), which those tools do not read; the view puts each folder where
its import name says it is. The subpackages are read from `package-dir` itself.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def subpackages() -> list[str]:
    """The top-level folders mapped into `noetlc` (`noetlc.X = "X"` in package-dir)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    return [folder for name, folder in mapping.items() if name.count(".") == 1]


def build(name: str) -> Path:
    """(Re)build the view in `ROOT/name` and return it."""
    view = ROOT / name
    if view.exists():
        shutil.rmtree(view)
    pkg = view / "noetlc"
    pkg.mkdir(parents=True)
    for f in (ROOT / "noetlc").iterdir():
        if f.is_file():
            os.symlink(f, pkg / f.name)
    for sub in subpackages():
        os.symlink(ROOT / sub, pkg / sub)
    return view
