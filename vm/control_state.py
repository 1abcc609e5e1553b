"""The control VM's state objects: tokens, step records and step runs (slots classes: the VM
creates several per transition fired). Commands and events are the protocol's (vm/protocol.py)."""

from __future__ import annotations

import hashlib
from typing import Any

from noetlc.vm.loop_results import LoopResults


class Token:
    __slots__ = ("args", "dead", "source")

    def __init__(self, args: dict[str, Any], dead: bool = False, source: str | None = None) -> None:
        self.args = args
        self.dead = dead
        self.source = source


class StepRecord:
    __slots__ = ("result", "runs", "status")

    def __init__(self) -> None:
        self.runs = 0
        self.status: str | None = None
        self.result: Any = None


# A run that is not a loop reads the loop fields from its class (empty containers it never
# adds to, zero counters); a loop step's run is a `LoopRun` with its own.
_NO_ITEMS: list[Any] = []
_NO_ITERATIONS: set[int] = set()


class StepRun:
    """One admitted run of a step: the args of the token that entered it and, for loops
    (`LoopRun`), the iteration bookkeeping. A plain run sets three fields only: the VM creates
    one per admission."""

    __slots__ = ("args", "run_id", "step")

    items: list[Any] = _NO_ITEMS
    results: list[Any] | LoopResults = _NO_ITEMS
    next_index = 0
    in_flight: set[int] = _NO_ITERATIONS
    done = 0
    failures = 0
    best_effort = False

    def __init__(self, step: str, run_id: str, args: dict[str, Any]) -> None:
        self.step = step
        self.run_id = run_id
        self.args = args


class LoopRun(StepRun):
    __slots__ = (
        "best_effort",
        "done",
        "failures",
        "in_flight",
        "items",
        "next_index",
        "results",
        "slots",
        "written",
    )

    def __init__(self, step: str, run_id: str, args: dict[str, Any]) -> None:
        super().__init__(step, run_id, args)
        self.items = []
        self.results: list[Any] | LoopResults = []
        self.next_index = 0
        self.in_flight = set()
        self.done = 0
        self.failures = 0
        self.best_effort = False
        self.slots = 1  # iterations in flight at most (`max_in_flight`, 1 when sequential)
        # parallel runs: ctx key -> (iteration, value) of the iteration that wrote it
        self.written: dict[str, tuple[int, Any]] = {}


def loop_result(run: StepRun) -> dict[str, Any]:
    """A loop step's result, in NoETL's shape: `results` the iterations' results in item order
    (a failed or cancelled iteration's is null), `stats` the finished iterations counted; a
    long loop's chunked results are stored and this is their reference (vm/loop_results.py)."""
    total = run.done
    stats = {"total": total, "success": total - run.failures, "failed": run.failures}
    if isinstance(run.results, LoopResults):
        return run.results.result(stats)
    return {"results": run.results, "stats": stats}


def job_namespace(execution_id: Any) -> dict[str, Any]:
    """NoETL's `job` namespace: `uuid`, `execution_id` and `id` all name the execution, as
    decimal text (noetl/noetl `noetl/core/dsl/engine/executor/state.py`,
    `get_render_context`; its worker fills `job.uuid` the same way)."""
    text = None if execution_id is None else str(execution_id)
    return {"uuid": text, "execution_id": text, "id": text}


def arc_output(result: Any, error: dict[str, Any] | None) -> dict[str, Any]:
    """`output` in a step's arc guards, args and `set`, as NoETL's engine builds it for them
    (noetl/noetl `noetl/core/dsl/engine/executor/common.py`, `_build_output_view`): `status`
    ok or error, `data` the result's `data` (an HTTP body) or the result itself when it has
    none, `error`; `result` is the whole result (noetlc's `outcome.result` spelling)."""
    if error is not None:
        return {"status": "error", "data": None, "result": None, "error": error}
    data = result.get("data", result) if type(result) is dict else result
    return {"status": "ok", "data": data, "result": result, "error": None}


def action_id(execution_id: str, step_run_id: str, iteration: int | None) -> str:
    """Stable per (step run, iteration): the same for every attempt (tool idempotency key)."""
    text = f"{execution_id}/{step_run_id}/{'' if iteration is None else iteration}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def racing_write(run: LoopRun, index: int, writes: Any) -> dict[str, Any] | None:
    """The error when iteration `index` of a parallel loop writes a ctx key another iteration
    wrote with a different value (the last write would win by timing); None otherwise, after
    noting this iteration's writes. Appends (`{append: x}`) never race."""
    for key, value in writes:
        if isinstance(value, dict) and len(value) == 1 and "append" in value:
            continue
        seen = run.written.get(key)
        if seen is None or seen[0] == index:
            run.written[key] = (index, value)
        elif seen[1] != value:
            return {
                "type": "ConflictingCtxWrites",
                "message": f"iterations {seen[0]} and {index} of the parallel loop of step "
                f"{run.step!r} wrote different values to ctx.{key}",
            }
    return None
