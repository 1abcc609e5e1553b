"""Run mypy over the `noetlc` package as it is installed (folders mapped by `package-dir`).

mypy discovers packages from folder names, and our folders (`compiler/`, `vm/`, ...) are
installed under `noetlc.` with setuptools' `package-dir`. This script builds a symlink view
`.typecheck/noetlc/<subpackage>` of the source tree (scripts/package_view.py) and checks that,
so error paths are real source paths and `strict` applies to `noetlc.ir` and `noetlc.vm` (pyproject overrides).
"""

from __future__ import annotations

import os
import subprocess
import sys

import package_view


def main() -> int:
    view = package_view.build(".typecheck")
    cmd = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(package_view.ROOT / "pyproject.toml"),
        "--cache-dir",
        str(view / ".mypy_cache"),
        "-p",
        "noetlc",
    ]
    env = dict(os.environ, MYPYPATH=str(view))
    return subprocess.call(cmd, cwd=view, env=env)


if __name__ == "__main__":
    sys.exit(main())
