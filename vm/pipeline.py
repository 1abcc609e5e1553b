"""The pipeline VM: runs one step's (or one iteration's) task list with outcome policies.

It executes the step's pipeline block: `TASK` evaluates the arguments and calls the tool
through `call_tool`, binds the outcome envelope (status, result, error, meta) and the task's result by name,
then the policy (`RULE`/`ELSE`/`UNMATCHED`) picks an action: `CONTINUE`, `RETRY` (bounded by
`attempts`, with backoff), `JUMP`, `BREAK` or `FAIL`, after `SET_ITER`/`SET_CTX_P` writes.
It records `task.*` events through `emit` and never raises: errors become a failed result.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from noetlc.expr.runtime import Scope
from noetlc.ir.events import EventName
from noetlc.vm.loaded_program import OP, LoadedProgram, StepInfo, evaluate_value
from noetlc.vm.locate import locate_code_error, locate_template_error

_TASK_DONE = EventName.TASK_DONE.value
_TASK_RETRY = EventName.TASK_RETRY.value
_TASK_STARTED = EventName.TASK_STARTED.value

ToolCall = Callable[[str, dict[str, Any], dict[str, Any] | None, str, int], dict[str, Any]]
Emit = Callable[[str, dict[str, Any]], None]
Wait = Callable[[float], bool]  # sleep up to N seconds; True if the run was cancelled meanwhile


@dataclass
class PipelineResult:
    ok: bool
    result: Any = None
    error: dict[str, Any] | None = None
    ctx_writes: list[tuple[str, Any]] = field(default_factory=list)


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False


def run_pipeline(
    program: LoadedProgram,
    step: StepInfo,
    base_scope: Scope,
    call_tool: ToolCall,
    emit: Emit,
    memo: dict[int, dict[str, Any]] | None = None,
    wait: Wait = _sleep,
    *,
    private_scope: bool = False,
) -> PipelineResult:
    """Run the step's tasks; `base_scope` has workload, ctx, args, iter and step results.

    `memo` maps a tool call's index within this run (0, 1, ...) to the outcome recorded for
    it by an earlier attempt of the same action: those calls are not made again (resume and
    re-leased jobs replay the pipeline deterministically up to the first unrecorded call).
    ctx writes are applied to a private copy of `ctx` and returned in `ctx_writes`. With
    `private_scope` the caller hands over a scope (and its `ctx` and `iter`) made for this run
    alone, and no copies are made.
    """
    code = step.pipeline
    if private_scope:
        scope: Scope = base_scope
        ctx: dict[str, Any] = scope["ctx"]
        iter_scope: dict[str, Any] = scope["iter"]
    else:
        scope = dict(base_scope)
        ctx = dict(scope.get("ctx") or {})
        scope["ctx"] = ctx
        iter_scope = dict(scope.get("iter") or {})
        scope["iter"] = iter_scope
    names = program.names
    pc = 0
    calls = 0
    attempts: dict[int, int] = {}
    last_result: Any = None
    current_task_pc = 0
    outcome: dict[str, Any] = {}
    writes: list[tuple[str, Any]] = []
    delays: tuple[float | None, float | None] | None = None  # RETRY_DELAYS -> the next RETRY

    def apply_ctx(key: str, value: Any) -> None:
        writes.append((key, value))
        if isinstance(value, dict) and len(value) == 1 and "append" in value:
            current = ctx.get(key)
            ctx[key] = [*(current if isinstance(current, list) else []), value["append"]]
        else:
            ctx[key] = value

    def finish(ok: bool, result: Any = None, error: dict[str, Any] | None = None) -> PipelineResult:
        if error is not None and "task" not in error and scope.get("_task") is not None:
            error = {**error, "task": scope["_task"]}  # which task failed, for the report
        return PipelineResult(ok, result, error, writes)

    executed = 0
    task = ""  # the task the rules that run are of
    max_executed, max_calls = MAX_INSTRUCTIONS, MAX_TASK_CALLS
    try:
        while True:
            executed += 1
            if executed > max_executed or calls >= max_calls:
                return finish(False, error=_over_budget(executed, calls))
            instruction = code[pc]
            op = instruction[0]
            if op == OP["TASK"]:
                if wait is not _sleep and wait(0):
                    return finish(False, error=CANCELLED)
                current_task_pc = pc
                task, kind = names[instruction[1]], names[instruction[2]]
                attempt = attempts.get(pc, 0) + 1
                attempts[pc] = attempt
                scope["_attempt"] = attempt
                scope["_task"] = task
                call = calls
                calls += 1
                recorded = memo.get(call) if memo else None
                if recorded is not None:
                    outcome = recorded
                else:
                    try:
                        args = program.value(instruction[3], scope) or {}
                        spec = program.value(instruction[4], scope)
                    except Exception as exc:
                        outcome = _error_outcome(exc, "TemplateError")
                        locate_template_error(exc, outcome["error"])
                    else:
                        emit(_TASK_STARTED, {"task": task, "attempt": attempt, "call": call})
                        if kind == "noop":  # the compiler's pass-through task: no tool call
                            outcome = {
                                "status": "ok",
                                "result": args["result"]
                                if args.get("result") is not None
                                else args.get("input"),
                                "error": None,
                                "meta": {},
                            }
                        elif kind == "workbook":
                            outcome = _workbook(program, args, scope, call_tool, task, attempt)
                        else:
                            outcome = call_tool(kind, args, spec, task, attempt)
                        if kind != "noop" and outcome["status"] == "ok":
                            reported = outcome.get("result")
                            if type(reported) is dict and reported.get("status") in _REPORTED:
                                outcome = _reported_error(outcome, reported, step, task)
                        failure = outcome.get("error")
                        if outcome.get("status") != "ok" and isinstance(failure, dict):
                            locate_code_error(program, instruction[3], args.get("code"), failure)
                    emit(
                        _TASK_DONE,
                        {
                            "task": task,
                            "attempt": attempt,
                            "call": call,
                            "status": outcome["status"],
                            "outcome": outcome,
                        },
                    )
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
                    return finish(False, error=outcome.get("error"))
            elif op == OP["SET_ITER"]:
                _apply(iter_scope, rule_writes(program, instruction[1], scope, step, task))
                pc += 1
            elif op == OP["SET_CTX_P"]:
                if pc >= step.end_pc:  # the step's own `set:` reads its result by its name
                    scope[step.name] = last_result
                    sets = program.value(instruction[1], scope)
                else:
                    sets = rule_writes(program, instruction[1], scope, step, task)
                for key, value in (sets or {}).items():
                    apply_ctx(key, value)
                pc += 1
            elif op == OP["CONTINUE"]:
                pc = step.next_task_pc[current_task_pc]
            elif op == OP["RETRY_DELAYS"]:
                try:
                    delays = (
                        _seconds(program.value(instruction[1], scope), "delay"),
                        _seconds(program.value(instruction[2], scope), "max_delay"),
                    )
                except (ValueError, TypeError) as exc:
                    return finish(False, error={"type": "TemplateError", "message": str(exc)})
                pc += 1
            elif op == OP["RETRY"]:
                limit, backoff, delay, max_delay, jitter = instruction[1:6]
                if delays is not None:  # written as templates, evaluated just before
                    delay = delays[0] if delays[0] is not None else delay
                    max_delay = delays[1] if delays[1] is not None else max_delay
                    delays = None
                if attempts.get(current_task_pc, 1) >= limit:
                    if outcome.get("status") == "ok":
                        pc = step.next_task_pc[current_task_pc]
                        continue
                    return finish(False, error=outcome.get("error"))
                attempt = attempts[current_task_pc]
                delay_s = _backoff(names[backoff], delay, max_delay, jitter, attempt)
                if not (memo and calls in memo):  # a recorded next attempt needs no wait
                    emit(
                        _TASK_RETRY,
                        {
                            "task": names[code[current_task_pc][1]],
                            "attempt": attempt,
                            "delay": round(delay_s, 3),
                        },
                    )
                    if delay_s > 0 and wait(delay_s):
                        return finish(False, error=CANCELLED)
                pc = current_task_pc
            elif op == OP["JUMP"]:
                pc = instruction[1]
                attempts.pop(pc, None)
            elif op == OP["BREAK"]:  # the pipeline ends well: the step's own ctx writes run
                pc = step.end_pc
            elif op == OP["FAIL"]:
                return finish(
                    False,
                    error=outcome.get("error")
                    or {"type": "PolicyFail", "message": "the task policy failed the pipeline"},
                )
            elif op == OP["END"]:
                return finish(True, result=last_result)
            else:
                return finish(
                    False,
                    error={
                        "type": "BytecodeError",
                        "message": f"unexpected opcode {op} in pipeline {step.name}",
                    },
                )
    except Exception as exc:
        return finish(False, error={"type": type(exc).__name__, "message": str(exc)})


CANCELLED = {"type": "Cancelled", "message": "the run was cancelled"}

# One run of a step's pipeline (one step run or one loop iteration): jumps and retries loop
# inside it, so its work is bounded by instructions executed and tool calls made.
MAX_INSTRUCTIONS = 1_000_000
MAX_TASK_CALLS = 10_000


def _over_budget(executed: int, calls: int) -> dict[str, Any]:
    what = (
        f"{calls:,} tool calls (at most {MAX_TASK_CALLS:,})"
        if calls >= MAX_TASK_CALLS
        else f"{executed:,} instructions (at most {MAX_INSTRUCTIONS:,})"
    )
    return {
        "type": "BudgetExceeded",
        "code": "NOE858",
        "message": f"one run of the step's tasks went over its budget: {what}",
    }


def rule_writes(
    program: LoadedProgram, index: int | None, scope: dict[str, Any], step: StepInfo, task: str
) -> dict[str, Any]:
    """A policy rule's `set:` values, each evaluated on its own: one whose template fails
    keeps the template's text, with a warning, as NoETL's task sequence does (noetl/noetl
    `noetl/worker/task_sequence_executor.py`: a failed `set` render is logged and the value
    kept; `noetl/worker/nats_worker.py` `render_template_str` gives the template back)."""
    if index is None:
        return {}
    node = program.values[index]
    body = node.get("$lit", node) if type(node) is dict and len(node) == 1 else node
    if type(body) is not dict or "$e" in body:
        return program.value(index, scope) or {}
    out: dict[str, Any] = {}
    for key, value in body.items():
        try:
            out[key] = evaluate_value(value, program.expressions, scope)
        except Exception as exc:
            import logging  # only on this path: `noetl-vm run` starts without it

            kept = _template_text(program, value)
            logging.getLogger("noetlc.vm.pipeline").warning(
                "step %s, task %s: `set: %s` could not be evaluated (%s); it keeps its "
                "text %r, as NoETL does",
                step.name,
                task,
                key,
                exc,
                kept,
            )
            out[key] = kept
    return out


def _template_text(program: LoadedProgram, value: Any) -> Any:
    if type(value) is dict and len(value) == 1 and "$e" in value:
        return program.expression_sources[value["$e"]]
    return value


def _apply(target: dict[str, Any], writes: Any) -> None:
    if isinstance(writes, dict):
        target.update(writes)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def _seconds(value: Any, what: str) -> float | None:
    """A retry delay evaluated from its template: a number of seconds (or such text, or a
    duration `5s`); null (`default(none)`) keeps the written default; anything else fails."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0 or not math.isfinite(value):
            raise ValueError(f"the retry `{what}` is {value!r}: not a number of seconds")
        return float(value)
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(
            f"the retry `{what}` evaluated to {str(value)[:60]!r}: not a number of seconds"
        )
    return float(match.group(1)) * _UNIT[match.group(2)]


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


# a result that says it failed fails its call, as NoETL's worker reads it
_REPORTED = frozenset({"error", "failed"})


def _reported_error(
    outcome: dict[str, Any], reported: dict[str, Any], step: StepInfo, task: str
) -> dict[str, Any]:
    """A tool result `{status: error, ...}` is a failed call: NoETL's worker fails a step
    whose tool (one mapping) returns `status: error` or `failed` (noetl/noetl
    `noetl/worker/nats_worker.py`, `_execute_command`), and a task of a `tool:` list (its task
    sequence) on `status: error` only (`noetl/worker/task_sequence_executor.py`). A step's
    one-mapping tool is its task `<step>_task` (compiler/shapes.py `default_task_name`). The
    result is kept (`outcome.result`); the error says what the result said."""
    status = reported["status"]
    if status == "failed" and task != f"{step.name}_task":
        return outcome
    said = reported.get("error", reported.get("message"))
    message = said.get("message") if isinstance(said, dict) else said
    return {
        **outcome,
        "status": "error",
        "error": {
            "type": "ToolReportedError",
            "message": str(message) if message else f"the task's result has status: {status}",
            "retryable": False,
        },
    }


def _error_outcome(exc: BaseException, kind: str) -> dict[str, Any]:
    return {
        "status": "error",
        "result": None,
        "error": {"type": kind, "message": str(exc)},
        "meta": {},
    }


def _workbook(
    program: LoadedProgram,
    args: dict[str, Any],
    scope: Scope,
    call_tool: ToolCall,
    task: str,
    attempt: int,
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
    result: dict[str, Any] = call_tool(
        kind, task_args, program.value(spec_index, scope), task, attempt
    )
    return result
