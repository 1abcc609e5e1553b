"""Run import-linter (`lint-imports`) over the `noetlc` package as it is installed.

Our folders (`compiler/`, `vm/`, ...) are installed under `noetlc.` with setuptools'
`package-dir`, and import-linter finds a package's modules by walking its folder. This script
builds a symlink view `.importlinter/noetlc/<subpackage>` of the source tree (as
scripts/typecheck.py does for mypy) and runs `lint-imports` with the contracts of
pyproject.toml (`[tool.importlinter]`) on it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUBPACKAGES = [
    "diagnostics",
    "expr",
    "ir",
    "stdlib_tools",
    "compiler",
    "vm",
    "analysis",
    "runtime",
    "cli",
    "bench",
]


def main() -> int:
    view = ROOT / ".importlinter"
    if view.exists():
        shutil.rmtree(view)
    pkg = view / "noetlc"
    pkg.mkdir(parents=True)
    for f in (ROOT / "noetlc").iterdir():
        if f.is_file():
            os.symlink(f, pkg / f.name)
    for sub in SUBPACKAGES:
        os.symlink(ROOT / sub, pkg / sub)
    # The view comes first on the path, so `noetlc` is found there with every subpackage.
    env = dict(os.environ, PYTHONPATH=str(view))
    cmd = [
        sys.executable,
        "-c",
        "import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())",
        str(ROOT / "pyproject.toml"),
        "--no-cache",
    ]
    return subprocess.call(cmd, cwd=view, env=env)


if __name__ == "__main__":
    sys.exit(main())
