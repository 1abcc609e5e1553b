"""Run mypy over the `noetlc` package as it is installed (folders mapped by `package-dir`).

mypy discovers packages from folder names, and our folders (`compiler/`, `vm/`, ...) are
installed under `noetlc.` with setuptools' `package-dir`. This script builds a symlink view
`.typecheck/noetlc/<subpackage>` of the source tree and checks that, so error paths are real
source paths and `strict` applies to `noetlc.ir` and `noetlc.vm` (pyproject overrides).
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
    view = ROOT / ".typecheck"
    if view.exists():
        shutil.rmtree(view)
    pkg = view / "noetlc"
    pkg.mkdir(parents=True)
    for f in (ROOT / "noetlc").iterdir():
        if f.is_file():
            os.symlink(f, pkg / f.name)
    for sub in SUBPACKAGES:
        os.symlink(ROOT / sub, pkg / sub)
    cmd = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(view / ".mypy_cache"),
        "-p",
        "noetlc",
    ]
    env = dict(os.environ, MYPYPATH=str(view))
    return subprocess.call(cmd, cwd=view, env=env)


if __name__ == "__main__":
    sys.exit(main())
