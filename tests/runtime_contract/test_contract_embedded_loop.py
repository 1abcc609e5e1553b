"""The embedded loop leaves the process as it found it: the collector enabled and nothing
frozen (it freezes what lives through a run only while the run lasts), no pool thread left
behind, whether the run completes or fails."""

from __future__ import annotations

import gc
import threading
from typing import Any

import pytest

from noetlc.compiler.pipeline import compile_source
from noetlc.runtime.embedded import run_embedded
from noetlc.runtime.event_store import MemoryStore

PLAYBOOK = """\
apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: loop, path: tests/loop}
workload: {fail: false}
workflow:
  - step: start
    tool: {kind: noop}
    next: work
  - step: work
    loop: {in: "{{ [1, 2, 3] }}", iterator: n, mode: parallel}
    tool:
      kind: python
      input: {n: "{{ n }}", fail: "{{ workload.fail }}"}
      code: |
        if fail:
            raise ValueError("asked to fail")
        result = {"n": n}
"""


def _payload() -> Any:
    unit = compile_source(PLAYBOOK, "loop.yaml")
    assert unit.program is not None, unit.reporter.diagnostics
    return unit.program


@pytest.mark.parametrize(("fail", "status"), [(False, "completed"), (True, "failed")])
def test_a_run_leaves_the_collector_and_threads_as_it_found_them(fail: bool, status: str) -> None:
    threads = {t.ident for t in threading.enumerate()}
    assert gc.isenabled()
    summary = run_embedded(_payload(), {"fail": fail}, MemoryStore())
    assert summary["status"] == status
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    left = [t.name for t in threading.enumerate() if t.ident not in threads]
    assert left == []
