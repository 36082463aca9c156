"""``pause_on_failure`` (issue 29): a job whose run failed for good pauses itself.

Called by the worker after it commits a run ``failed`` (its attempts used up, or a permanent
failure) and by the miss detector after it fails a run whose attempts or redispatches ran out.
The pause is a write on the job item, conditional on the item as read (``pause_on_failure_op``),
and only when the job item is still the definition the run was claimed under (its digest): a
person's newer edit is never overwritten. The registrar applies the pause through the stream as
it applies a person's. Best effort: a pause that cannot be written is logged, never raised, and
the failed run stays failed (its ``run.failed`` event and ``Failures`` metric are written first).
"""

from __future__ import annotations

from jobsched.core.clock import Clock
from jobsched.core.errors import ConditionFailed, StoreError
from jobsched.core.job import InvalidJob, JobDefinition, definition_digest
from jobsched.core.transitions import pause_on_failure_op
from jobsched.core.writes import JOBS
from jobsched.ports import Store, Telemetry


class Pauser:
    def __init__(self, store: Store, telemetry: Telemetry, clock: Clock) -> None:
        self._store = store
        self._telemetry = telemetry
        self._clock = clock

    def after_final_failure(self, job_id: str, run_id: str, def_hash: str, error: str) -> bool:
        """Pause the job if its definition (as the failed run was claimed under it) asks for it.
        Returns whether this call paused it."""
        try:
            job = self._store.get(JOBS, {"job_id": job_id})
            if job is None:
                return False
            try:
                definition = JobDefinition.from_item(job)
            except InvalidJob:
                return False
            if not definition.pause_on_failure or not definition.enabled:
                return False
            if definition_digest(job) != def_hash:
                self._telemetry.event(
                    "job.pause_skipped", job_id, run_id=run_id, reason="the job was edited since the run"
                )
                return False
            reason = f"run {run_id} failed: {error.splitlines()[0] if error else 'failed'}"
            self._store.update(pause_on_failure_op(job, reason, self._clock.now_ms()))
        except ConditionFailed:
            self._telemetry.event("job.pause_skipped", job_id, run_id=run_id, reason="edited meanwhile")
            return False
        except StoreError as exc:
            self._telemetry.event("job.pause_failed", job_id, run_id=run_id, error=str(exc)[:300])
            return False
        self._telemetry.event("job.paused_on_failure", job_id, run_id=run_id, reason=reason)
        self._telemetry.metric("JobsPausedOnFailure", 1)
        return True
