"""Peer runner for the NoETL CLI from PyPI (`noetl`, its local Rust runner), own virtualenv.

    python peer_noetl.py SPEC.json  →  one JSON object {"results": {...}, "version": ...}

SPEC: {"workflows": {name: {"playbook": path, "repeat": k}}}. Runs each playbook through
`noetl.run(path)` — the package's Python API, the same engine as `noetl run PATH -r local`
without the process start — and reports the best wall time. The local runner runs shell steps
(one process per step) and ignores `loop:`, so only the chain and the guarded self-loop are
given to it.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from importlib.metadata import version
from typing import Any


def main(spec_path: str) -> dict[str, Any]:
    import noetl

    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    results: dict[str, Any] = {}
    for name, w in spec["workflows"].items():
        best = float("inf")
        for _ in range(w.get("repeat", 1)):
            started = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                outcome = noetl.run(w["playbook"])
            elapsed = time.perf_counter() - started
            if outcome.get("status") not in ("ok", "success", "completed"):
                raise SystemExit(f"{name}: {outcome.get('status')} {outcome.get('error')}")
            best = min(best, elapsed)
        results[name] = {"seconds": best}
    return {"results": results, "version": version("noetl")}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
