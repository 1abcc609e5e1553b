"""Peer runner for Prefect 3 (local, ephemeral API server), run by its own virtualenv.

    python peer_prefect.py SPEC.json  →  one JSON object {"results": {...}, "version": ...}

SPEC: {"sizes": {"chain": n, "loop": n, "decisions": n}, "repeat": k}. The same workflows as
flows of tasks: n tasks called one after the other; one task mapped over n items
(`task.map`, Prefect's loop); a while-loop of n task calls, each followed by a decision in
the flow. The first flow run (it starts the local server) is a warm-up and reported as
`startup`; then each flow runs `repeat` times and the best wall time is reported. The caller
sets PREFECT_HOME to a scratch folder.
"""

from __future__ import annotations

import json
import sys
import time
from importlib.metadata import version
from typing import Any


def main(spec_path: str) -> dict[str, Any]:
    from prefect import flow, task

    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)

    def _noop(x: Any = None) -> Any:
        return x

    noop = task(_noop)

    def _chain(n: int) -> None:
        for i in range(n):
            noop(i)

    def _loop(n: int) -> list[Any]:
        return [f.result() for f in noop.map(list(range(n)))]

    def _decisions(n: int) -> int:
        i = 0
        while True:
            i = int(noop(i)) + 1
            if not i < n:
                return i

    # decorators written as calls: prefect is not installed where mypy runs
    chain, loop, decisions = flow(_chain), flow(_loop), flow(_decisions)
    flows = {"chain": chain, "loop": loop, "decisions": decisions}
    started = time.perf_counter()
    chain(1)
    results: dict[str, Any] = {"startup": {"seconds": time.perf_counter() - started}}
    for name, n in spec["sizes"].items():
        best = float("inf")
        for _ in range(spec.get("repeat", 1)):
            t0 = time.perf_counter()
            flows[name](n)
            best = min(best, time.perf_counter() - t0)
        results[name] = {"seconds": best}
    return {"results": results, "version": version("prefect")}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
