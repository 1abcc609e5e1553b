"""Running one command of the control VM: a step's pipeline, or one iteration of a loop step.

Shared by the embedded runtime and distributed workers. The pipeline VM runs with the scope
the command carries; the `task.*` events it emits become worker events with the full envelope
(vm/protocol.py), handed to `emit`, and the run ends with one terminal event:
`step.done`/`step.failed`, or `loop.iteration.done`/`.failed`, carrying the result and the ctx
writes. So that a console can show what runs, the run's first `task.started` is logged (with
the worker and when the action was handed to it), the later ones are not: the `task.done`
before each says the next call starts. The last task call's `task.done` is folded into the
terminal event (`fold_task`); an earlier call's `task.done` is logged before the next call
starts, so a finished tool is logged before the next one runs. What the tools print goes to
the execution's task logs (`ToolEnv.logs`, runtime/logs.py), never to this process's output.
`memo_from_events` turns an action's recorded task outcomes (`task.done` events and folded
records) into the pipeline VM's memo, so a resumed or re-leased action does not call a
finished tool again.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from noetlc.expr.runtime import RESOLVER_KEY
from noetlc.runtime.ids import child_execution_id
from noetlc.runtime.logs import ActionLog, ExecutionLogs
from noetlc.stdlib_tools.context import ToolContext
from noetlc.stdlib_tools.keychain import Keychain
from noetlc.stdlib_tools.kinds import lookup
from noetlc.stdlib_tools.registry import call_tool as call_registry_tool
from noetlc.vm.control_state import job_namespace
from noetlc.vm.loaded_program import OP, LoadedProgram
from noetlc.vm.pipeline import ToolCall, Wait, run_pipeline
from noetlc.vm.protocol import (
    RESULT_NAMES,
    Command,
    Event,
    EventName,
    Source,
    action_event,
    fold_task,
    folded_task,
)

_LOOP_ITERATION_DONE = EventName.LOOP_ITERATION_DONE.value
_LOOP_ITERATION_FAILED = EventName.LOOP_ITERATION_FAILED.value
_STEP_DONE = EventName.STEP_DONE.value
_STEP_FAILED = EventName.STEP_FAILED.value
_TASK_DONE = EventName.TASK_DONE.value
_TASK_STARTED = EventName.TASK_STARTED.value

EmitEvent = Callable[[Event], None]
# `kind: playbook`: (path, workload, the calling action_id, the child's execution id) -> the
# child's summary; the runtime cancels the child when the calling action is cancelled
# (path, workload, action_id, child_id, wait): the child's summary, or with wait=False
# `{execution_id, status: started}` once it is started (RunPlaybook in stdlib_tools/context.py)
StartChild = Callable[[str, dict[str, Any], str, str, bool], dict[str, Any]]

# worker event ids: unique per process run (a random prefix) and cheap (a counter)
_PROCESS = uuid.uuid4().hex[:16]
_COUNTER = itertools.count(1)


def worker_event(
    name: str,
    step: str,
    step_run_id: str,
    action_id: str,
    iteration: int | None,
    payload: dict[str, Any],
    attempt: int | None = None,
    task_run_id: str | None = None,
) -> Event:
    """An event of an action (a task's, or its result), with an id unique to this process."""
    return action_event(
        f"w:{_PROCESS}:{next(_COUNTER)}",
        name,
        step,
        step_run_id,
        iteration,
        action_id,
        payload,
        attempt,
        task_run_id,
    )


@dataclass(frozen=True)
class ToolEnv:
    """What the runtime lends every tool call: the keychain, the playbook's folder, and the
    way to start a child execution (`kind: playbook`)."""

    keychain: Keychain | None = None
    workdir: Path = field(default_factory=Path.cwd)
    start_child: StartChild | None = None
    logs: ExecutionLogs | None = None  # where task output goes (None: not kept)
    worker: str | None = None  # who runs the actions, as `task.started` names it

    def caller(
        self,
        execution_id: str,
        action_id: str,
        step: str,
        scope: dict[str, Any] | None = None,
        cancelled: Callable[[], bool] | None = None,
        log: ActionLog | None = None,
    ) -> ToolCall:
        """`scope`: the pipeline's own scope (read by the python tool's `context` global);
        `cancelled`: true once the action is cancelled (a tool that can stop early polls it);
        `log`: the action's task output."""

        def call(
            kind: str, args: dict[str, Any], spec: dict[str, Any] | None, task: str, attempt: int
        ) -> dict[str, Any]:
            start_child = self.start_child
            run_playbook = None
            child_id = None
            if start_child is not None:
                child_id = child_execution_id(execution_id, action_id, task, attempt)

                def run_playbook(
                    path: str, workload: dict[str, Any], wait: bool = True
                ) -> dict[str, Any]:
                    assert start_child is not None and child_id is not None
                    return start_child(path, workload, action_id, child_id, wait)

            context = ToolContext(
                execution_id,
                action_id,
                step,
                task,
                attempt,
                self.keychain,
                self.workdir,
                run_playbook,
                scope,
                cancelled,
                None if log is None else log.writer(task, attempt),
                child_id,
            )
            return call_registry_tool(kind, args, spec, context)

        return call


DEFAULT_ENV = ToolEnv()


def default_tools(
    kind: str, args: dict[str, Any], spec: dict[str, Any] | None, *_: Any
) -> dict[str, Any]:
    return call_registry_tool(kind, args, spec)


def execute(
    program: LoadedProgram,
    command: Command,
    scope: dict[str, Any],
    emit: EmitEvent,
    call_tool: ToolCall | None = None,
    memo: dict[int, dict[str, Any]] | None = None,
    wait: Wait | None = None,
    env: ToolEnv = DEFAULT_ENV,
    resolve: Callable[[dict[str, Any]], Any] | None = None,
    handed_at: float | None = None,
    borrow_scope: bool = False,
) -> Event:
    """Run the command (a `run` command of the control VM: a step, or one iteration of a
    loop step); emit its events; return the terminal event (also emitted).
    Tools run through the registry with a `ToolContext` from `env`, unless `call_tool` is
    given (tests). `resolve` (reference-first results, from the result store) replaces the
    scope's own resolver: the pipeline may read any stored result, the control VM only those
    its input events brought. `handed_at`: when the action was handed to this worker (the
    lease, or the submission to the thread pool), told by the first `task.started`.
    `borrow_scope`: `scope` is lent for this call and nobody reads it meanwhile (the embedded
    loop's inline runs of noop-only steps, which it waits for): the run writes its own names
    into it and puts the old values back when it ends, instead of copying a scope that gains
    an entry per finished step (a copy per step made a chain quadratic)."""
    step = command.step
    step_run_id = command.step_run_id
    action_id = command.action_id
    args = command.args
    iteration = command.iteration
    item = command.item
    info = program.steps[step]
    saved: list[tuple[str, Any]] | None = None
    if borrow_scope:
        run_scope = scope
        saved = [(key, scope.get(key, _ABSENT)) for key in _written(program, step)]
    else:
        run_scope = dict(scope)
    run_scope["ctx"] = dict(scope.get("ctx") or {})
    run_scope["args"] = args
    run_scope.pop("event", None)
    run_scope["job"] = job_namespace(scope.get("execution_id"))
    if resolve is not None:
        run_scope[RESOLVER_KEY] = resolve
    if iteration is not None and info.loop is not None:
        run_scope["iter"] = {info.loop["iterator"]: item, "index": iteration}
        # NoETL's `loop` of an iteration: the item's index from 0 (noetl/noetl
        # `noetl/core/dsl/engine/executor/commands.py`, the loop metadata of a command)
        run_scope["loop"] = {"index": iteration, "first": iteration == 0, "done": False}
        run_scope["loop_index"] = iteration
    else:
        run_scope["iter"] = {}
    action_log = None
    if call_tool is None:
        cancelled = None if wait is None else (lambda: wait(0))
        if env.logs is not None:
            action_log = env.logs.action(step, action_id, iteration)
        call_tool = env.caller(
            str(scope.get("execution_id") or ""),
            action_id,
            step,
            run_scope,
            cancelled,
            action_log,
        )

    # A finished task's `task.done` is held back until the pipeline goes on: the next call's
    # start or a retry logs it first (a finished tool is logged before the next one runs, so
    # a resumed or re-leased action replays it), and the last one is folded into the
    # terminal event instead of being logged on its own. Only the run's first `task.started`
    # is logged (the action runs now); the `task.done` before a later call says it starts.
    held: list[dict[str, Any]] = []
    started = False

    def log_held() -> None:
        if held:
            payload = held.pop()
            emit(
                worker_event(
                    _TASK_DONE,
                    step,
                    step_run_id,
                    action_id,
                    iteration,
                    payload,
                    attempt=payload.get("attempt"),
                    task_run_id=f"{action_id}:{payload.get('call')}",
                )
            )

    def on_task_event(name: str, payload: dict[str, Any]) -> None:
        nonlocal started
        log_held()
        if name == _TASK_DONE:
            held.append(payload)
        elif name == _TASK_STARTED:
            if not started:
                started = True
                payload = dict(payload)
                if env.worker is not None:
                    payload["worker"] = env.worker
                if handed_at is not None:
                    payload["handed_at"] = handed_at
                emit(
                    worker_event(
                        name,
                        step,
                        step_run_id,
                        action_id,
                        iteration,
                        payload,
                        attempt=payload.get("attempt"),
                        task_run_id=f"{action_id}:{payload.get('call')}",
                    )
                )
        else:
            call = payload.get("call")
            emit(
                worker_event(
                    name,
                    step,
                    step_run_id,
                    action_id,
                    iteration,
                    payload,
                    attempt=payload.get("attempt"),
                    task_run_id=None if call is None else f"{action_id}:{call}",
                )
            )

    try:
        if wait is None:
            outcome = run_pipeline(
                program, info, run_scope, call_tool, on_task_event, memo, private_scope=True
            )
        else:
            outcome = run_pipeline(
                program, info, run_scope, call_tool, on_task_event, memo, wait, private_scope=True
            )
    finally:
        if saved is not None:
            for key, value in saved:
                if value is _ABSENT:
                    run_scope.pop(key, None)
                else:
                    run_scope[key] = value
        if action_log is not None:
            action_log.flush()  # before the terminal event: the output is there when it ends
    if iteration is None:
        name = _STEP_DONE if outcome.ok else _STEP_FAILED
    elif outcome.ok:
        name = _LOOP_ITERATION_DONE
    else:
        name = _LOOP_ITERATION_FAILED
    payload: dict[str, Any] = {"result": outcome.result} if outcome.ok else {"error": outcome.error}
    if outcome.ctx_writes:
        payload["ctx_writes"] = [[key, value] for key, value in outcome.ctx_writes]
    if held:
        fold_task(payload, held.pop())
    terminal = worker_event(name, step, step_run_id, action_id, iteration, payload)
    emit(terminal)
    return terminal


_ABSENT = object()
# What a run writes at the scope's root besides its tasks' and its step's names: execute's own
# entries and the pipeline VM's (vm/pipeline.py).
_RUN_NAMES = ("ctx", "args", "event", "iter", "job", "loop", "loop_index", RESOLVER_KEY)
_PIPELINE_NAMES = ("_attempt", "_task", "outcome", "output", "_prev")


def _written(program: LoadedProgram, step: str) -> list[str]:
    """The root names a run of `step` may write into its scope."""
    info = program.steps[step]
    tasks = [program.names[i[1]] for i in info.pipeline if i[0] == OP["TASK"]]
    return [*_RUN_NAMES, *_PIPELINE_NAMES, info.name, *tasks]


def noop_only(program: LoadedProgram) -> dict[str, bool]:
    """Per step: does its pipeline call only inline kinds (`ToolKind.inline`: no I/O), so that
    runtimes run it in their event loop instead of the pool?"""
    return {
        name: all(_inline(program.names[i[2]]) for i in info.pipeline if i[0] == OP["TASK"])
        for name, info in program.steps.items()
    }


def _inline(kind: str) -> bool:
    record = lookup(kind)
    return record is not None and record.inline


def memo_from_events(events: list[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    """action_id -> {call index -> recorded outcome}, from `task.done` events and the task
    records folded into terminal events."""
    memo: dict[str, dict[int, dict[str, Any]]] = {}
    for event in events:
        name = event["name"]
        if event.get("source") != Source.WORKER or not event.get("action_id"):
            continue
        payload = event.get("payload") or {}
        if name == _TASK_DONE:
            record: dict[str, Any] | None = payload
        elif name in RESULT_NAMES:
            record = folded_task(payload)
        else:
            continue
        if record is not None and "call" in record and "outcome" in record:
            memo.setdefault(event["action_id"], {})[int(record["call"])] = record["outcome"]
    return memo
