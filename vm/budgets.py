"""Per-execution budgets (docs/runtime.md, "Budgets").

A cycle whose exit guard never becomes true, or a loop over a runaway list, must end: every
execution has budgets, counted by the control VM over what it decides and what it is fed, so
a replay of the log goes over a budget at exactly the same event. Going over one fails the
execution with NOE858 and the counts. The defaults are of the order of what Temporal enforces
on one workflow history (51,200 events and 50 MB): our events are finer (a step is 4 to 6
events), so the event budget is larger.

A playbook sets its own in `executor: {spec: {budgets: {events: 1000000}}}`; `noetl-vm run`
and `submit` take `--budget NAME=N`, written into the program's executor spec (so a resumed or
taken-over execution keeps them). 0 means "no limit".
"""

from __future__ import annotations

from typing import Any

DEFAULTS: dict[str, int] = {
    "events": 250_000,  # events of the execution's log the VM decided or was fed
    "step_runs": 25_000,  # step runs (a step entered again by a cycle is a new run)
    "loop_iterations": 100_000,  # loop iterations started, all loops together
    "ctx_size": 50_000_000,  # characters and items held in `ctx` (see `expr.limits.deep_size`)
    # across child executions (`kind: playbook`), counted by the runtime over a root's tree;
    # the root's budgets bound every descendant. Over one, the calling step fails (NOE858)
    "child_depth": 32,  # levels of children below the root
    "child_executions": 2_000,  # child executions of one root, all levels together
    # storage, counted by the runtime over the results it is handed (runtime/results.py):
    # over one, the action's result is replaced by the NOE858 error (the step fails)
    "result_bytes": 64 * 1024 * 1024,  # one step run's or iteration's result (its JSON)
    "stored_bytes": 1024 * 1024 * 1024,  # all the results of one execution together
}
NAMES = tuple(DEFAULTS)


class OverBudget(Exception):
    """Raised inside the control VM when a count goes over its budget (NOE858)."""

    def __init__(self, name: str, count: int, limit: int, counts: dict[str, int]) -> None:
        self.error = {
            "code": "NOE858",
            "message": f"the execution went over its {name} budget ({count:,} > {limit:,})",
            "step": None,
            "budget": name,
            "counts": counts,
        }
        super().__init__(self.error["message"])


def over_budget_error(name: str, count: int, limit: int, what: str) -> dict[str, Any]:
    """The NOE858 error of a budget the runtime counts (`what` says what grew)."""
    return {
        "code": "NOE858",
        "message": f"{what} went over the {name} budget ({count:,} > {limit:,})",
        "step": None,
        "budget": name,
        "counts": {name: count},
    }


class BudgetError(ValueError):
    """A malformed `--budget` option or `budgets:` entry."""


def budgets_of(payload: dict[str, Any]) -> dict[str, int]:
    """The budgets of a program's payload map (`budgets_for` of its executor spec)."""
    return budgets_for(payload.get("executor_spec"))


def budgets_for(spec: Any) -> dict[str, int]:
    """The budgets of a program: the defaults, then its executor spec's `budgets`."""
    out = dict(DEFAULTS)
    given = spec.get("budgets") if isinstance(spec, dict) else None
    if isinstance(given, dict):
        for name, value in given.items():
            if name in out and type(value) is int and value >= 0:
                out[name] = value
    return out


def parse_option(text: str) -> tuple[str, int]:
    """`NAME=N` of `--budget`."""
    name, sep, raw = text.partition("=")
    if not sep or name not in DEFAULTS:
        raise BudgetError(
            f"--budget needs NAME=N with NAME one of {', '.join(NAMES)}, got {text!r}"
        )
    try:
        value = int(raw)
    except ValueError:
        raise BudgetError(f"--budget {name} needs a whole number, got {raw!r}") from None
    if value < 0:
        raise BudgetError(f"--budget {name} cannot be negative")
    return name, value


def spec_with_budgets(
    spec: dict[str, Any] | None, budgets: dict[str, int]
) -> dict[str, Any] | None:
    """A copy of an executor spec that carries `budgets` (over its own); `spec` itself when
    there are none (`Program.with_executor_spec` takes the result)."""
    if not budgets:
        return spec
    out = dict(spec or {})
    out["budgets"] = {**(out.get("budgets") or {}), **budgets}
    return out
