"""The registrar: makes job items written by people schedulable, or marks them invalid.

It acts on the item as it is now (a consistent read), never on a stream image's view of the
past, so replayed and reordered stream records are harmless. Its own writes leave the definition
and hence ``def_hash`` unchanged, so the stream records they cause are recognised from the image
alone and cost nothing: no loop.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from jobsched.core.clock import Clock, dt_to_ms, ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed
from jobsched.core.job import InvalidJob, JobDefinition
from jobsched.core.run import shard_of
from jobsched.core.writes import JOBS, Cond, Update, eq, not_exists
from jobsched.ports import Store, Telemetry
from jobsched.services.jobs import item_hash, mark_invalid, version_as_read

TRIES = 3


class Registration(StrEnum):
    UNCHANGED = "unchanged"
    SCHEDULED = "scheduled"
    PAUSED = "paused"
    FINISHED = "finished"
    INVALID = "invalid"
    ABSENT = "absent"
    CONFLICT = "conflict"


class Registrar:
    def __init__(self, store: Store, telemetry: Telemetry, clock: Clock, cfg: SchedulerConfig) -> None:
        self._store = store
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg

    def on_stream_record(
        self, event_name: str, job_id: str, new_image: dict[str, Any] | None
    ) -> Registration:
        if event_name == "REMOVE" or new_image is None:
            # Deleting a job stops it; its runs stay as history and in-flight ones finish.
            self._telemetry.event("job.deleted", job_id)
            return Registration.ABSENT
        if _consistent(new_image):
            return Registration.UNCHANGED
        return self.apply(job_id)

    def apply(self, job_id: str) -> Registration:
        for _ in range(TRIES):
            item = self._store.get(JOBS, {"job_id": job_id})
            if item is None:
                return Registration.ABSENT
            if _consistent(item):
                return Registration.UNCHANGED
            try:
                return self._register(item)
            except ConditionFailed:
                continue  # changed under us: read again
        self._telemetry.event("job.registration_conflict", job_id)
        return Registration.CONFLICT

    def _register(self, item: dict[str, Any]) -> Registration:
        now = self._clock.now_ms()
        try:
            definition = JobDefinition.from_item(item)
        except InvalidJob as exc:
            if not mark_invalid(self._store, self._telemetry, item, exc.reasons, now, item_hash(item)):
                raise ConditionFailed(0, "mark job invalid", None) from exc
            return Registration.INVALID
        sets: dict[str, Any] = {
            "def_hash": definition.definition_hash(),
            "version": int(item.get("version") or 0) + 1,
            "updated_at": now,
        }
        remove = ["invalid_reasons"]
        outcome: Registration
        if not definition.enabled:
            sets["status"] = "paused"
            remove += ["next_run_at", "sched_shard"]
            outcome = Registration.PAUSED
        else:
            # A changed schedule takes effect from its next occurrence after now (or after the
            # last claimed one, so a re-registered job never goes back in time).
            base = max(now, int(item.get("last_scheduled_at") or 0))
            following = definition.compiled_schedule().next_after(ms_to_dt(base))
            if following is None:
                sets["status"] = "finished"
                remove += ["next_run_at", "sched_shard"]
                outcome = Registration.FINISHED
            else:
                sets.update(
                    status="active",
                    next_run_at=dt_to_ms(following),
                    sched_shard=shard_of(definition.job_id, self._cfg.shard_count),
                )
                outcome = Registration.SCHEDULED
        self._store.update(
            Update(
                JOBS,
                {"job_id": definition.job_id},
                condition=(version_as_read(item), *_definition_as_read(item)),
                label="register job",
                set=sets,
                remove=tuple(remove),
            )
        )
        self._telemetry.event(
            f"job.{outcome.value}",
            definition.job_id,
            next_run_at=sets.get("next_run_at"),
            def_hash=sets["def_hash"],
        )
        return outcome


def _definition_as_read(item: dict[str, Any]) -> tuple[Cond, ...]:
    why = "a person changed the definition since we read it: its own stream record will bring it"
    parts = []
    for name in ("schedule", "timezone", "enabled"):
        parts.append(eq(name, item[name], why) if name in item else not_exists(name, why))
    return tuple(parts)


def _consistent(item: dict[str, Any]) -> bool:
    """The scheduler state already matches the definition: nothing to do."""
    digest = item.get("def_hash")
    if digest is None or digest != item_hash(item):
        return False
    status = item.get("status")
    if status == "invalid":
        return True
    enabled = item.get("enabled", True)
    if status == "paused":
        return enabled is False
    if status == "active":
        return enabled is not False and "next_run_at" in item
    return status == "finished"


__all__ = ["Registrar", "Registration", "not_exists"]
