"""The progress line counts a task whether its record is a `task.done` event (older logs,
earlier calls of a pipeline) or folded into the terminal event."""

from __future__ import annotations

import io

from noetlc.runtime.progress import Progress
from noetlc.vm.protocol import EventName, Source, envelope


def test_progress_counts_folded_and_separate_task_records() -> None:
    progress = Progress(2, io.StringIO())
    folded = {"result": 1, "task": "t", "attempt": 1, "call": 0, "status": "ok"}
    progress(
        [
            envelope(EventName.STEP_SCHEDULED, Source.SERVER, step="a", step_run_id="a#1"),
            envelope(EventName.TASK_DONE, Source.WORKER, step="a", payload={"call": 0}),
            envelope(EventName.STEP_DONE, Source.WORKER, step="a", step_run_id="a#1"),
            envelope(EventName.LOOP_STARTED, Source.SERVER, step="b", payload={"count": 2}),
            envelope(EventName.LOOP_ITERATION_DONE, Source.WORKER, step="b", payload=folded),
        ]
    )
    assert progress.tasks == 2 and progress.done == {"a"} and progress.loops["b"] == [1, 2]
    assert progress.line().startswith("steps 1/2 · tasks 2 · b 1/2")
