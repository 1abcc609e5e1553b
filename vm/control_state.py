"""The control VM's state: `ControlState`, the one object every part of the VM reads and
writes (vm/routing.py, vm/admission.py, vm/boundary.py take it as their first argument;
`ControlVM` in vm/control.py is a `ControlState` with the interface), and what it holds per
step record and step run (slots classes: the VM creates several per transition fired).
Tokens and join places are vm/joins.py's; commands and events the protocol's
(vm/protocol.py)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from noetlc.expr.runtime import RESOLVER_KEY
from noetlc.ir.events import EventName
from noetlc.vm.budgets import OverBudget, budgets_of
from noetlc.vm.joins import JoinPlaces, Token
from noetlc.vm.loaded_program import LoadedProgram
from noetlc.vm.loop_results import LoopResults, Spill
from noetlc.vm.protocol import Event, Source, action_id
from noetlc.vm.tables import StepTable, build_tables

__all__ = [
    "ControlState",
    "LoopRun",
    "Resolve",
    "StepRecord",
    "StepRun",
    "Token",
    "action_id",
    "arc_output",
    "job_namespace",
    "loop_result",
    "racing_write",
]

# the body of a `{"$ref": ...}` -> the value it refers to, from memory (no I/O: see ControlVM)
Resolve = Callable[[dict[str, Any]], Any]

_EXECUTION_FAILED = EventName.EXECUTION_FAILED.value
_SERVER = Source.SERVER.value
_new = tuple.__new__  # an Event without its Python-level __new__ (one per transition)


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


class ControlState:
    """Everything the control VM keeps for one execution, and the few operations every part
    of it uses: record a server event, fail the execution, exceed a budget, set the scope."""

    # slots: it holds more attributes than an instance dict shares keys for, and the hot path
    # reads them on every event
    __slots__ = (
        "_events",
        "_max_events",
        "_max_step_runs",
        "_stamp",
        "budgets",
        "ctx",
        "ctx_size",
        "ctx_sizes",
        "dead_arrivals",
        "error",
        "event_count",
        "execution_id",
        "final_result",
        "firings",
        "handled_failures",
        "inputs",
        "iterations",
        "join_places",
        "listeners",
        "program",
        "ready",
        "results",
        "runs",
        "scope",
        "spill",
        "status",
        "step_runs",
        "steps",
        "tables",
        "timers",
        "workload",
    )

    def __init__(
        self,
        program: LoadedProgram,
        workload: dict[str, Any],
        execution_id: str,
        keychain: dict[str, Any] | None,
        resolve: Resolve | None,
        spill: Spill | None,
    ) -> None:
        self.program = program
        # where a long loop's iteration results go in chunks (vm/loop_results.py); None: kept
        self.spill = spill
        self.tables: dict[str, StepTable] = build_tables(program)
        self.workload = workload
        self.execution_id = execution_id
        self.ctx: dict[str, Any] = {}
        self.results: dict[str, Any] = {}  # finished steps by name
        # step results by name plus the namespaces: what guards and arc args see
        self.scope: dict[str, Any] = {
            "workload": workload,
            "ctx": self.ctx,
            "execution_id": execution_id,
            "job": job_namespace(execution_id),
        }
        if keychain is not None:
            self.scope["keychain"] = keychain
        if resolve is not None:
            self.scope[RESOLVER_KEY] = resolve
        self.steps: dict[str, StepRecord] = {}
        # the current answer's server events (or the compact records of the generated hot
        # path, vm/specialise.py), in order
        self._events: list[Any] = []
        # (event id prefix, execution id), shared by the records: server event ids EXECUTION:sN
        self._stamp = (f"{execution_id}:s", execution_id)
        self.event_count = 0  # server events recorded so far (N of the last id)
        self.join_places = JoinPlaces(program.joins, program.join_kind, self.has_run)
        self.runs: dict[str, StepRun] = {}  # active step runs by step_run_id
        self.listeners: dict[str, StepRun] = {}  # waiting listener steps by step_run_id
        self.timers: set[str] = set()  # step_run_ids with a pending timer
        self.ready: deque[tuple[str, Token]] = deque()
        self.dead_arrivals: dict[str, int] = {}  # merges: dead alternatives seen so far
        self.error: dict[str, Any] | None = None
        self.status = "running"
        self.budgets = budgets_of(program.payload)
        self._max_events = self.budgets["events"]  # read on every step: attributes
        self._max_step_runs = self.budgets["step_runs"]
        self.inputs = 0  # input events fed (with `event_count`: the events budget)
        self.step_runs = 0
        self.iterations = 0
        self.ctx_size = 0  # characters and items held in ctx (`expr.limits.deep_size`)
        self.ctx_sizes: dict[str, int] = {}
        self.firings = 0
        self.handled_failures = 0
        self.final_result: Any = None  # the result of the step that finished last

    def record(
        self,
        name: str,
        step: str | None,
        payload: dict[str, Any],
        step_run_id: str | None = None,
        iteration: int | None = None,
    ) -> None:
        """Record a server event. The generated handlers (vm/specialise.py) record compact
        `protocol.ServerRecord`s instead, built into `Event`s when `VMAnswer.events` is
        read."""
        self.event_count = n = self.event_count + 1
        event = (name, _SERVER, step, step_run_id, iteration, payload, f"{self._stamp[0]}{n}",
                 self.execution_id, None, None, None, None, None, None, None)  # fmt: skip
        self._events.append(_new(Event, event))  # `protocol.recorded`, inlined

    def counts(self) -> dict[str, int]:
        """What the budgets count, so far."""
        return {
            "events": self.event_count + self.inputs,
            "step_runs": self.step_runs,
            "loop_iterations": self.iterations,
            "ctx_size": self.ctx_size,
        }

    def _over(self, name: str, count: int, limit: int) -> None:
        """A budget is exceeded: the execution fails (`ControlVM` catches it)."""
        raise OverBudget(name, count, limit, self.counts())

    def fail(self, error: dict[str, Any]) -> None:
        if self.status == "running":
            self.status = "failed"
            self.error = error
            self.record(_EXECUTION_FAILED, error.get("step"), {"error": error})

    def has_run(self, step: str) -> bool:
        record = self.steps.get(step)
        return record is not None and record.runs != 0

    def scope_for(self, args: dict[str, Any], event: dict[str, Any] | None) -> dict[str, Any]:
        """The one scope of the control VM, updated in place (evaluation is sequential)."""
        scope = self.scope
        scope["args"] = args
        scope.pop("output", None)  # a step's own (`arc_output`), not a listener's
        if event is None:
            scope.pop("event", None)
        else:
            scope["event"] = event
        return scope
