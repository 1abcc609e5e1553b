"""Expired job leases: every distributed server reaps them (runtime/server.py's rounds)."""

from __future__ import annotations

from noetlc.runtime.backend import Backend
from noetlc.vm.protocol import EventName, Source, envelope


async def reap_expired(db: Backend) -> bool:
    """Re-queue the jobs whose lease expired; a job out of attempts becomes a failure event
    of its step or loop iteration (a worker source: it stands for the worker that never
    finished it). True when any lease was reaped."""
    reaped = await db.queue.reap()
    for job in reaped:
        if job.status != "failed":
            continue
        state = await db.queue.get(job.job_id)
        if state is None:
            continue
        p = state.payload
        if p.get("iteration") is None:
            name = EventName.STEP_FAILED
        else:
            name = EventName.LOOP_ITERATION_FAILED
        error = {
            "type": "LeaseExpired",
            "message": f"no worker finished the job in {job.max_attempts} attempts ({job.reason})",
        }
        await db.events.append(
            job.execution_id,
            [
                envelope(
                    name,
                    Source.WORKER,
                    event_id=f"{job.action_id}:reaped",
                    step=p.get("step"),
                    step_run_id=p.get("step_run_id"),
                    iteration=p.get("iteration"),
                    action_id=job.action_id,
                    payload={"error": error},
                )
            ],
        )
    return bool(reaped)
