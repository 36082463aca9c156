"""Reading a job item as the services need it: its validated definition and compiled schedule."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed
from jobsched.core.job import STATE_FIELDS, InvalidJob, JobDefinition
from jobsched.core.schedule import Schedule
from jobsched.core.writes import JOBS, Cond, Update, eq, not_exists
from jobsched.ports import Store, Telemetry


@dataclass(frozen=True)
class LoadedJob:
    item: dict[str, Any]
    definition: JobDefinition
    schedule: Schedule


def load_job(item: dict[str, Any]) -> LoadedJob:
    """Raises InvalidJob with reasons a person can act on."""
    definition = JobDefinition.from_item(item)
    return LoadedJob(item, definition, definition.compiled_schedule())


def mark_invalid(
    store: Store, telemetry: Telemetry, item: dict[str, Any], reasons: list[str], now: int, def_hash: str
) -> bool:
    """Take an unschedulable job out of the next-run index with its reasons; never raise, so one
    bad item cannot fail a batch. Returns whether this write won."""
    update = Update(
        JOBS,
        {"job_id": item["job_id"]},
        condition=(version_as_read(item),),
        label="mark job invalid",
        set={
            "status": "invalid",
            "invalid_reasons": reasons,
            "def_hash": def_hash,
            "version": int(item.get("version") or 0) + 1,
            "updated_at": now,
        },
        remove=("next_run_at", "sched_shard"),
    )
    try:
        store.update(update)
    except ConditionFailed:
        return False
    telemetry.event("job.invalid", str(item.get("job_id")), reasons=reasons)
    telemetry.metric("InvalidJobs", 1)
    return True


def version_as_read(item: dict[str, Any]) -> Cond:
    why = "the item changed since we read it (a racer, or a person fixing it): act on the new state instead"
    if item.get("version") is None:
        return not_exists("version", why)
    return eq("version", item["version"], why)


def item_hash(item: dict[str, Any]) -> str:
    """The digest of an item's definition, or of its raw definition attributes when invalid."""
    try:
        return JobDefinition.from_item(item).definition_hash()
    except InvalidJob:
        # Every attribute but jobsched's own state: fixing a misspelled field changes the digest.
        raw = {k: v for k, v in item.items() if k not in STATE_FIELDS}
        return (
            "invalid-"
            + hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()[:16]
        )


__all__ = ["LoadedJob", "SchedulerConfig", "item_hash", "load_job", "mark_invalid"]
