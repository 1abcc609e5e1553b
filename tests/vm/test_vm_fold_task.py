"""A terminal event carries its pipeline's last task record folded: `folded_task` gives back
exactly the `task.done` payload `fold_task` folded, and the step's result is stored once."""

from __future__ import annotations

from typing import Any

import pytest

from noetlc.vm.protocol import fold_task, folded_task

RESULT = {"rows": [1, 2, 3]}
ERROR = {"type": "ToolError", "message": "boom"}


def _done(outcome: dict[str, Any]) -> dict[str, Any]:
    return {"task": "t", "attempt": 2, "call": 1, "status": outcome["status"], "outcome": outcome}


@pytest.mark.parametrize(
    "terminal, outcome, stored",
    [
        # the usual case: nothing but the task's name, attempt, call and status is added
        ({"result": RESULT}, {"status": "ok", "result": RESULT, "error": None, "meta": {}}, {}),
        # meta, and a result that is not the step's (a later task failed, policy continue)
        (
            {"result": RESULT},
            {"status": "error", "result": None, "error": ERROR, "meta": {"ms": 3}},
            {"result": None, "error": ERROR, "meta": {"ms": 3}},
        ),
        ({"error": ERROR}, {"status": "error", "result": None, "error": ERROR, "meta": {}}, {}),
        (
            {"result": None},
            {"status": "ok", "result": [9], "error": None, "meta": {}},
            {"result": [9]},
        ),
    ],
)
def test_fold_then_unfold_gives_the_task_record_back(
    terminal: dict[str, Any], outcome: dict[str, Any], stored: dict[str, Any]
) -> None:
    payload = dict(terminal)
    fold_task(payload, _done(outcome))
    assert payload.get("outcome", {}) == stored
    assert folded_task(payload) == _done(outcome)


def test_a_terminal_event_without_a_folded_record() -> None:
    assert folded_task({"result": 1}) is None
