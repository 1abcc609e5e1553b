"""Several iterations of one loop in one job: *bundles* (distributed mode, docs/distributed.md).

A job row costs the queue the same whatever it runs: the server's insert and the payload it
encodes, the worker's pick, its completion (a new row version and index entries) and the
payload it decodes. When a loop's tool is cheap (a noop, a short python task) that cost is
most of the iteration's, so a server round that starts many iterations of one loop groups
consecutive ones into one job whose payload lists its *members*, `[action_id, iteration,
item]` each (`step`, `step_run_id`, `args`, `ctx` and `results` are the loop run's, shared).

What stays per iteration: each member runs under its own action id — event ids
`<action_id>:<attempt>:<n>`, the tools' idempotency key, a child execution's id — and logs
exactly the events a one-iteration job logs; a worker runs the members side by side, one slot
each. What is per job: the lease (one holder, one attempt count, one heartbeat, one fencing
token) and the commit (the members' events are appended with the job's completion: all of
them or none; a retried attempt runs every member again, under the same ids).

Rules:

* only RUN commands of one loop run, of consecutive iterations, issued in one round; at most
  `per_job` members, and at least SPREAD jobs per loop and round, so that the iterations still
  spread over the workers: a round of n iterations makes bundles of min(per_job, n // SPREAD)
  (none below two);
* cancel: the control VM cancels a loop's in-flight iterations all at once (fail_fast,
  stop_when, racing ctx writes, the execution cancelled) and a bundle commits all of its
  members at once, so cancelling a member cancels its job (the server keeps which job holds
  each bundled action: `BundleIndex`);
* takeover: the new owner enqueues the outstanding iterations one per job (job id = action
  id, as always) except those a stored bundle holds. A bundle's job id is its first member's
  action id and its members are consecutive iterations, so the jobs that can hold iteration
  `i` are named by the action ids of iterations `i - LIMIT + 1 .. i`: looked up by primary
  key (`covering_jobs`), no index over payloads needed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from noetlc.runtime.queue import JobQueue, JobSpec
from noetlc.vm.control_state import action_id as derive_action_id
from noetlc.vm.protocol import Command, CommandKind

# a round keeps at least this many jobs per loop (the iterations spread over the workers)
SPREAD = 64
# the default members per bundle, and the most a server may be configured with (the window
# a takeover searches for the bundle of an iteration)
PER_JOB = 16
LIMIT = 64

Member = tuple[str, int | None, Any]  # action_id, iteration (None: not a loop), item


def members(payload: dict[str, Any]) -> list[Member] | None:
    """A bundle's members, or None for a job of one action."""
    found = payload.get("members")
    return None if found is None else [(m[0], m[1], m[2]) for m in found]


def size(payload: dict[str, Any]) -> int:
    """How many actions a job runs (a worker slot each)."""
    found = payload.get("members")
    return 1 if found is None else len(found)


def job_actions(action_id: str, payload: dict[str, Any]) -> list[Member]:
    """What a job runs: a bundle's members, or its one action (with the payload's iteration
    and item)."""
    found = members(payload)
    return [(action_id, payload.get("iteration"), payload.get("item"))] if found is None else found


def build_jobs(
    commands: Sequence[Command],
    execution_id: str,
    pool: str,
    ctx: dict[str, Any],
    results: dict[str, Any],
    *,
    per_job: int = PER_JOB,
    spread: int = SPREAD,
) -> list[JobSpec]:
    """The jobs of the RUN commands, in command order: a bundle where the rules above allow
    one, else a job per command. Empty and None fields are left out of the payload (a worker
    reads each with its default): one row per job, written and rewritten, and encoded in the
    server's serial round."""
    runs = [c for c in commands if c.kind == CommandKind.RUN]
    if not runs:
        return []
    groups = _groups(runs, per_job, spread) if per_job > 1 else [[c] for c in runs]
    jobs = []
    for group in groups:
        first = group[0]
        payload: dict[str, Any] = {"step": first.step, "step_run_id": first.step_run_id}
        if first.args:
            payload["args"] = first.args
        if len(group) > 1:
            payload["members"] = [[c.action_id, c.iteration, c.item] for c in group]
        else:
            if first.iteration is not None:
                payload["iteration"] = first.iteration
            if first.item is not None:
                payload["item"] = first.item
        if ctx:
            payload["ctx"] = ctx
        if results:
            payload["results"] = results
        action = first.action_id
        jobs.append(JobSpec(action, execution_id, action, payload, pool=pool))
    return jobs


def _groups(runs: list[Command], per_job: int, spread: int) -> list[list[Command]]:
    """Consecutive iterations of one loop run, up to the bundle size of their run."""
    counts: dict[str, int] = {}
    for command in runs:
        if command.iteration is not None:
            counts[command.step_run_id] = counts.get(command.step_run_id, 0) + 1
    sizes = {run: min(per_job, n // spread) for run, n in counts.items()}
    groups: list[list[Command]] = []
    open_: dict[str, list[Command]] = {}  # run -> its bundle being filled
    for command in runs:
        run, iteration = command.step_run_id, command.iteration
        if iteration is None or sizes.get(run, 0) < 2:
            groups.append([command])
            continue
        group = open_.get(run)
        if (
            group is None
            or len(group) >= sizes[run]
            or group[-1].iteration != iteration - 1
            or command.args is not group[0].args
        ):
            group = open_[run] = []
            groups.append(group)
        group.append(command)
    return groups


class BundleIndex:
    """Which job holds each action of a bundle still in flight (a server's, per execution):
    the control VM cancels actions; the queue cancels jobs."""

    __slots__ = ("_job_of",)

    def __init__(self) -> None:
        self._job_of: dict[str, str] = {}

    def __bool__(self) -> bool:
        return bool(self._job_of)

    def add(self, jobs: Iterable[JobSpec]) -> None:
        for job in jobs:
            found = job.payload.get("members")
            if found is not None:
                for member in found:
                    self._job_of[member[0]] = job.job_id

    def hold(self, held: dict[str, str]) -> None:
        """Actions a stored bundle holds (a takeover's `covering_jobs`)."""
        for action, job_id in held.items():
            if action != job_id:
                self._job_of[action] = job_id

    def done(self, action_id: str | None) -> None:
        """An action's result was read: it will not be cancelled any more."""
        if action_id is not None:
            self._job_of.pop(action_id, None)

    def jobs(self, action_ids: Iterable[str]) -> list[str]:
        """The jobs to cancel for these actions (each once, in first-seen order)."""
        job_of = self._job_of
        return list(dict.fromkeys(job_of.get(a, a) for a in action_ids))


async def covering_jobs(
    queue: JobQueue, execution_id: str, commands: Sequence[Command]
) -> dict[str, str]:
    """For the outstanding loop iterations among `commands` (a takeover's), the stored
    bundles that hold them: action id -> job id. Candidates are the action ids of the LIMIT
    iterations up to each one (a bundle is named by its first member)."""
    windows: dict[str, set[int]] = {}  # step run -> the iterations whose action may name one
    for command in commands:
        iteration = command.iteration
        if command.kind == CommandKind.RUN and iteration is not None:
            windows.setdefault(command.step_run_id, set()).update(
                range(max(0, iteration - LIMIT + 1), iteration + 1)
            )
    candidates = [
        derive_action_id(execution_id, run, i)
        for run, iterations in windows.items()
        for i in sorted(iterations)
    ]
    if not candidates:
        return {}
    held: dict[str, str] = {}
    for job in await queue.get_many(candidates):
        if job.execution_id != execution_id:
            continue
        for action, _, _ in job_actions(job.action_id, job.payload):
            held[action] = job.job_id
    return held
