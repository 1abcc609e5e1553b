"""Copy the console's third-party code from `service/webdeps/node_modules` (installed by
`npm ci` from the lockfile) into `service/static/vendor`, where the package ships it built:
users need neither npm nor a build step. Run after changing service/webdeps/package.json:

    cd service/webdeps && npm ci && cd ../.. && python scripts/vendor_console.py
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEPS = ROOT / "service" / "webdeps"
VENDOR = ROOT / "service" / "static" / "vendor"
# package -> (its built file, the name the console loads, its license file)
FILES = {"@dagrejs/dagre": ("dist/dagre.min.js", "dagre.min.js", "LICENSE")}


def main() -> int:
    VENDOR.mkdir(parents=True, exist_ok=True)
    for package, (built, name, license_file) in FILES.items():
        folder = DEPS / "node_modules" / package
        if not folder.is_dir():
            print(f"{package} is not installed: run `npm ci` in {DEPS}", file=sys.stderr)
            return 1
        version = json.loads((folder / "package.json").read_text())["version"]
        shutil.copyfile(folder / built, VENDOR / name)
        shutil.copyfile(folder / license_file, VENDOR / f"{name}.LICENSE")
        print(f"{package} {version} -> {VENDOR / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
