"""The pipeline VM: runs one step's (or one iteration's) task list with outcome policies.

It executes the step's pipeline block: `TASK` evaluates the arguments and calls the tool
through `call_tool`, binds the outcome envelope (DESIGN §2.3) and the task's result by name,
then the policy (`RULE`/`ELSE`/`UNMATCHED`) picks an action: `CONTINUE`, `RETRY` (bounded by
`attempts`, with backoff), `JUMP`, `BREAK` or `FAIL`, after `SET_ITER`/`SET_CTX_P` writes.
It records `task.*` events through `emit` and never raises: errors become a failed result.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from noetlc.vm.expr_runtime import Scope
from noetlc.vm.program import OP, Program, StepInfo

ToolCall = Callable[[str, dict[str, Any], dict[str, Any] | None], dict[str, Any]]
Emit = Callable[[str, dict[str, Any]], None]


@dataclass
class PipelineResult:
    ok: bool
    result: Any = None
    error: dict[str, Any] | None = None
    ctx_writes: list[tuple[str, Any]] = field(default_factory=list)


def run_pipeline(
    program: Program,
    step: StepInfo,
    base_scope: Scope,
    call_tool: ToolCall,
    emit: Emit,
    apply_ctx: Callable[[str, Any], None],
) -> PipelineResult:
    """Run the step's tasks; `base_scope` has workload, ctx, args, iter and step results."""
    code = step.pipeline
    scope: Scope = dict(base_scope)
    iter_scope: dict[str, Any] = scope.setdefault("iter", {})
    names = program.names
    pc = 0
    attempts: dict[int, int] = {}
    last_result: Any = None
    current_task_pc = 0
    outcome: dict[str, Any] = {}
    try:
        while True:
            instruction = code[pc]
            op = instruction[0]
            if op == OP["TASK"]:
                current_task_pc = pc
                task, kind = names[instruction[1]], names[instruction[2]]
                attempt = attempts.get(pc, 0) + 1
                attempts[pc] = attempt
                scope["_attempt"] = attempt
                scope["_task"] = task
                try:
                    args = program.value(instruction[3], scope) or {}
                    spec = program.value(instruction[4], scope)
                except Exception as exc:
                    outcome = _error_outcome(exc, "TemplateError")
                else:
                    emit("task.started", {"task": task, "attempt": attempt})
                    if kind == "workbook":
                        outcome = _workbook(program, args, scope, call_tool)
                    else:
                        outcome = call_tool(kind, args, spec)
                emit("task.done", {"task": task, "attempt": attempt, "status": outcome["status"]})
                scope["outcome"] = outcome
                scope["output"] = {**outcome, "data": outcome.get("result")}
                if outcome["status"] == "ok":
                    last_result = outcome.get("result")
                    scope[task] = last_result
                    scope["_prev"] = last_result
                pc += 1
                continue
            if op == OP["OK_SET_ITER"]:
                if outcome.get("status") == "ok":
                    _apply(iter_scope, program.value(instruction[1], scope))
                pc += 1
            elif op == OP["OK_SET_CTX"]:
                if outcome.get("status") == "ok":
                    for key, value in (program.value(instruction[1], scope) or {}).items():
                        apply_ctx(key, value)
                pc += 1
            elif op == OP["RULE"]:
                if program.evaluate(instruction[1], scope):
                    pc = instruction[2]
                else:
                    pc += 1
            elif op == OP["ELSE"]:
                pc = instruction[1]
            elif op == OP["UNMATCHED"]:
                if outcome.get("status") == "ok" or instruction[1] == 1:
                    pc = step.next_task_pc[current_task_pc]
                else:
                    return PipelineResult(False, error=outcome.get("error"))
            elif op == OP["SET_ITER"]:
                _apply(iter_scope, program.value(instruction[1], scope))
                pc += 1
            elif op == OP["SET_CTX_P"]:
                for key, value in (program.value(instruction[1], scope) or {}).items():
                    apply_ctx(key, value)
                    scope["ctx"] = base_scope["ctx"]
                pc += 1
            elif op == OP["CONTINUE"]:
                pc = step.next_task_pc[current_task_pc]
            elif op == OP["RETRY"]:
                limit, backoff, delay, max_delay, jitter = instruction[1:6]
                if attempts.get(current_task_pc, 1) >= limit:
                    if outcome.get("status") == "ok":
                        pc = step.next_task_pc[current_task_pc]
                        continue
                    return PipelineResult(False, error=outcome.get("error"))
                emit(
                    "task.retry",
                    {"task": names[code[current_task_pc][1]], "attempt": attempts[current_task_pc]},
                )
                time.sleep(
                    _backoff(names[backoff], delay, max_delay, jitter, attempts[current_task_pc])
                )
                pc = current_task_pc
            elif op == OP["JUMP"]:
                pc = instruction[1]
                attempts.pop(pc, None)
            elif op == OP["BREAK"]:
                return PipelineResult(True, result=last_result)
            elif op == OP["FAIL"]:
                return PipelineResult(
                    False,
                    error=outcome.get("error")
                    or {"type": "PolicyFail", "message": "the task policy failed the pipeline"},
                )
            elif op == OP["END"]:
                return PipelineResult(True, result=last_result)
            else:
                return PipelineResult(
                    False,
                    error={
                        "type": "BytecodeError",
                        "message": f"unexpected opcode {op} in pipeline {step.name}",
                    },
                )
    except Exception as exc:
        return PipelineResult(False, error={"type": type(exc).__name__, "message": str(exc)})


def _apply(target: dict[str, Any], writes: Any) -> None:
    if isinstance(writes, dict):
        target.update(writes)


def _backoff(
    kind: str, delay: float, max_delay: float | None, jitter: float, attempt: int
) -> float:
    if kind == "exponential":
        wait = delay * (2 ** (attempt - 1))
    elif kind == "linear":
        wait = delay * attempt
    else:
        wait = delay
    if max_delay is not None:
        wait = min(wait, max_delay)
    if jitter:
        wait += wait * jitter * random.random()
    return max(0.0, float(wait))


def _error_outcome(exc: BaseException, kind: str) -> dict[str, Any]:
    return {
        "status": "error",
        "result": None,
        "error": {"type": kind, "message": str(exc)},
        "meta": {},
    }


def _workbook(
    program: Program, args: dict[str, Any], scope: Scope, call_tool: ToolCall
) -> dict[str, Any]:
    """`kind: workbook`: run the named root workbook task with the caller's input merged in."""
    target = args.get("task") or args.get("name")
    entry = program.workbook.get(str(target))
    if entry is None:
        error = {"type": "WorkbookError", "message": f"no workbook task {target!r}"}
        return {"status": "error", "result": None, "error": error}
    kind, args_index, spec_index = entry
    task_args = program.value(args_index, scope) or {}
    given = args.get("input") if args.get("input") is not None else args.get("args")
    if isinstance(given, dict):
        own = task_args.get("input")
        task_args["input"] = {**(own if isinstance(own, dict) else {}), **given}
    result: dict[str, Any] = call_tool(kind, task_args, program.value(spec_index, scope))
    return result
