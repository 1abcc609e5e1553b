"""What the runtime tells a tool about the call it is making (re-exported by `registry`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from noetlc.stdlib_tools.keychain import Keychain

# Given a playbook path or catalog name and its workload arguments, run a child execution and
# return its summary `{"execution_id", "status", "result", "error"}` (the runtime provides it);
# with `wait=False` start it and return `{"execution_id", "status": "started"}` at once (the
# child runs on by itself), or the summary of a child that could not start.
RunPlaybook = Callable[..., dict[str, Any]]


@dataclass(frozen=True)
class ToolContext:
    """What a tool call knows about where it runs."""

    execution_id: str | None = None
    # Stable per step run / task / iteration, the same for every attempt: tools may use it as
    # an idempotency key for their side effects: the same for every attempt of an action, so a
    # retried or re-leased task can apply its effect once.
    action_id: str | None = None
    step: str | None = None
    task: str | None = None
    attempt: int = 1
    keychain: Keychain | None = None  # None: the default providers (environment, file)
    workdir: Path = field(default_factory=Path.cwd)  # the playbook's folder
    run_playbook: RunPlaybook | None = None
    # The pipeline's scope at the call (workload, ctx, iter, step and task results by name,
    # execution_id, the reference resolver): the python tool's `context` global reads it.
    scope: Mapping[str, Any] | None = None
    # True once the action is cancelled (or its worker shuts down): a tool that can stop
    # early polls it (`isolation: subprocess` python kills its child process).
    cancelled: Callable[[], bool] | None = None
    # `log(stream, text)`, stream "stdout" or "stderr": what the task prints. The runtime
    # bounds, escapes, redacts and stores it with the execution (runtime/logs.py); None: the
    # output is not kept (a tool called outside a run).
    log: Callable[[str, str], None] | None = None
    # the id a child execution started by this call gets (None: not known here)
    child_id: str | None = None
