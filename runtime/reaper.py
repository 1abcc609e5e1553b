"""Expired job leases: every distributed server reaps them (runtime/server.py's rounds)."""

from __future__ import annotations

from noetlc.ir.events import EventName
from noetlc.runtime.backend import Backend
from noetlc.runtime.bundles import job_actions
from noetlc.vm.protocol import Source, envelope


async def reap_expired(db: Backend) -> bool:
    """Re-queue the jobs whose lease expired; a job out of attempts becomes a failure event
    of its step or loop iteration (a worker source: it stands for the worker that never
    finished it; a bundle's, one per member). True when any lease was reaped."""
    reaped = await db.queue.reap()
    for job in reaped:
        if job.status != "failed":
            continue
        state = await db.queue.get(job.job_id)
        if state is None:
            continue
        p = state.payload
        error = {
            "type": "LeaseExpired",
            "message": f"no worker finished the job in {job.max_attempts} attempts ({job.reason})",
        }
        # one failure per action the job ran: a bundle's members are iterations of one loop
        failures = [
            envelope(
                EventName.STEP_FAILED if iteration is None else EventName.LOOP_ITERATION_FAILED,
                Source.WORKER,
                event_id=f"{action_id}:reaped",
                step=p.get("step"),
                step_run_id=p.get("step_run_id"),
                iteration=iteration,
                action_id=action_id,
                payload={"error": error},
            )
            for action_id, iteration, _ in job_actions(job.action_id, p)
        ]
        await db.events.append(job.execution_id, failures)
    return bool(reaped)
