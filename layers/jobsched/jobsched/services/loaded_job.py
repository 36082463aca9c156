"""A job as the trigger and the miss detector act on it: its state item, with the definition the
state was registered from, read from the job item and checked against the state's digest."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from jobsched.core.job import InvalidJob, JobDefinition
from jobsched.core.schedule import Schedule
from jobsched.core.state import state_schedule
from jobsched.core.writes import JOBS, STATE, Item
from jobsched.ports import Store


@dataclass(frozen=True)
class LoadedJob:
    state: Item
    definition: JobDefinition
    snapshot: Item  # the definition as a run carries it
    def_hash: str
    schedule: Schedule  # the state's timing, which is the definition's (same digest)


def load_job(
    store: Store, state: Item, repair: Callable[[str], object], head: Mapping[str, Any] | None = None
) -> LoadedJob | None:
    """The job behind a state item, or None when its job item no longer matches the state (a
    person changed or deleted it and the registrar has not caught up): ``repair`` (the
    registrar, applied inline) is called then, so that a lagging or failed stream delivery never
    leaves a job stuck; the caller reads the state afresh next time.

    ``head``: the job's head under the successor claim (its ``due`` entry or a read; issue 37,
    successor-claim-build.md §4 row "Settler, load_job"). Its run is claimed with the definition
    whose digest is the head's ``def_hash``, not the state's: the head carries the timing it was
    made with, and a change that moves the digest makes a new head (HC10). Its count is the
    head's ``runs_before``, so no state read is needed for ``max_runs``."""
    job_id = str(state["job_id"])
    item = store.get(JOBS, {"job_id": job_id})
    definition: JobDefinition | None = None
    if item is not None:
        try:
            definition = JobDefinition.from_item(item)
        except InvalidJob:
            definition = None
    # The digest is computed once per claim (it serialises the whole definition).
    digest = definition.definition_hash() if definition is not None else None
    expected = head.get("def_hash") if head is not None else state.get("def_hash")
    if definition is None or digest != expected:
        repair(job_id)
        return None
    if head is not None:
        counted = {**state, "runs_claimed": int(head.get("runs_before") or 0)}
        return LoadedJob(counted, definition, definition.to_item(), str(digest), state_schedule(dict(head)))
    if definition.max_runs is not None and "runs_claimed" not in state:
        # max_runs counts on the state item, and the next-run index does not project the count
        # (changing a GSI's projection means replacing the index): a job with a limit reads its
        # state item once before it is claimed or settled (a read, no write). The claim stays
        # conditional on the version, which moves with every change of the count.
        fresh = store.get(STATE, {"job_id": job_id})
        if fresh is None or fresh.get("version") != state.get("version"):
            return None  # moved since the index page: the caller reads it again next time
        state = {**fresh, "runs_claimed": int(fresh.get("runs_claimed") or 0)}
    return LoadedJob(state, definition, definition.to_item(), str(digest), state_schedule(state))
