"""Peer runner for SpiffWorkflow, executed by the interpreter of its own virtualenv.

    python peer_spiff.py SPEC.json  →  prints one JSON object {"results": {...}, "version": ...}

SPEC: {"workflows": {name: {"bpmn": path, "process": id, "repeat": k}}}. Each workflow is
parsed once (untimed), then run `repeat` times; the best wall time in seconds is reported.
Standalone on purpose: it imports nothing from noetlc.
"""

from __future__ import annotations

import json
import sys
import time
from importlib.metadata import version
from typing import Any


def main(spec_path: str) -> dict[str, Any]:
    from SpiffWorkflow.bpmn.parser.BpmnParser import BpmnParser
    from SpiffWorkflow.bpmn.workflow import BpmnWorkflow

    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    results: dict[str, Any] = {}
    for name, w in spec["workflows"].items():
        parser = BpmnParser()
        parser.add_bpmn_file(w["bpmn"])
        process = parser.get_spec(w["process"])
        best = float("inf")
        for _ in range(w.get("repeat", 1)):
            started = time.perf_counter()
            workflow = BpmnWorkflow(process)
            workflow.do_engine_steps()
            elapsed = time.perf_counter() - started
            if not workflow.is_completed():
                raise SystemExit(f"{name}: the workflow did not complete")
            best = min(best, elapsed)
        results[name] = {"seconds": best}
    return {"results": results, "version": version("SpiffWorkflow")}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
