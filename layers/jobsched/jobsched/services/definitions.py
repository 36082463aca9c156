"""The definitions runs run under, kept once per version rather than once per run.

A run item carries only its definition's digest (``def_hash``): its size, and so its write units,
do not grow with the payload. The message a worker receives carries the definition itself. When
a run is sent by someone who does not hold its definition (the miss detector recovering it, a
commit promoting a buffered run), the definition is read back:

1. from the job item, when its digest is the run's (the common case: the job did not change);
2. else from the snapshot the registrar saved when it registered that definition (an item in the
   state table, ``core.transitions.snapshot_key``). A snapshot has no expiry while its definition
   is current; once superseded or deleted, it expires with the run history (TTL), so a run
   claimed before a change still runs under the definition it was claimed with.
"""

from __future__ import annotations

import contextlib

from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed
from jobsched.core.job import InvalidJob, JobDefinition
from jobsched.core.transitions import retire_definition_op, save_definition_op, snapshot_key
from jobsched.core.writes import JOBS, STATE, Item
from jobsched.ports import Store


def is_snapshot(state_item: Item) -> bool:
    """Whether an item of the state table is a definition snapshot, not a job's state."""
    return "#" in str(state_item.get("job_id"))


class Definitions:
    def __init__(self, store: Store, cfg: SchedulerConfig) -> None:
        self._store = store
        self._cfg = cfg

    def save(self, definition: JobDefinition) -> None:
        """Keep the definition being registered (before the state names it, so that every run
        claimed under its digest can find it)."""
        self._store.update(
            save_definition_op(definition.job_id, definition.definition_hash(), definition.to_item())
        )

    def retire(self, job_id: str, def_hash: str, now: int) -> None:
        """Let a superseded definition expire once no run under it can still be waiting."""
        with contextlib.suppress(ConditionFailed):  # no snapshot under that digest: nothing to do
            self._store.update(retire_definition_op(job_id, def_hash, now, self._cfg))

    def load(self, job_id: str, def_hash: str) -> Item | None:
        """The definition with this digest, or None when neither the job item nor a snapshot
        holds it (expired: no run under it can still be waiting)."""
        job = self._store.get(JOBS, {"job_id": job_id}, consistent=False)
        if job is not None:
            try:
                current = JobDefinition.from_item(job)
            except InvalidJob:
                current = None  # a person broke it since: the snapshot still holds the run's
            if current is not None and current.definition_hash() == def_hash:
                return current.to_item()
        snapshot = self._store.get(STATE, snapshot_key(job_id, def_hash), consistent=False)
        if snapshot is None:
            return None
        definition: Item = snapshot["definition"]
        return definition
