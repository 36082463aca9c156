"""The miss detector's bookkeeping item (the reconcile cursor) and the registrar's definition
snapshots: writes in the state table that are no job's state and no record.
"""

from __future__ import annotations

from jobsched.core.config import SchedulerConfig
from jobsched.core.transitions.conditions import retention_expiry
from jobsched.core.writes import STATE, Item, Update, eq, exists, not_exists

# --- the miss detector's bookkeeping (services/reconciler.py) ----------------------------------

# The detector's own item in the state table: the reconciler's place in the jobs table and the
# highest ShardCount whose shards may still hold index entries. ``#`` starts no job id
# (``JOB_ID_PATTERN`` starts with a letter or digit), and a snapshot's key is ``<job_id>#...``,
# so no job's state and no snapshot can have this key; readers of the state table skip it as
# they skip snapshots (services/definitions.py ``is_snapshot``: its key holds ``#``).
BOOKKEEPING_KEY: Item = {"job_id": "#detector"}


def bookkeeping_op(item: Item | None, sets: Item, remove: tuple[str, ...], now: int) -> Update:
    """Move the detector's bookkeeping on, conditional on it as read: two detector invocations
    that overlap (one runs into the next minute's) read the same cursor; only one moves it, the
    other stops reconciling for this run, so no page is skipped and none is read twice."""
    version = int(item["version"]) if item is not None else 0
    why = "another detector invocation moved the reconcile cursor or the shard mark since we read it"
    return Update(
        STATE,
        dict(BOOKKEEPING_KEY),
        condition=(eq("version", version, why) if item is not None else not_exists("job_id", why),),
        label="detector bookkeeping",
        set={**sets, "version": version + 1, "updated_at": now},
        remove=tuple(name for name in remove if item is not None and name in item),
    )


# --- definition snapshots (services/definitions.py) ----------------------------------------------


def snapshot_key(job_id: str, def_hash: str) -> Item:
    """A definition's snapshot lives in the state table beside the job's state, under a key no
    job can have (``#`` is not allowed in a job id), so it is never in the next-run index."""
    return {"job_id": f"{job_id}#{def_hash}"}


def save_definition_op(job_id: str, def_hash: str, definition: Item) -> Update:
    """Keep the definition a job is being registered with, without expiry while it is current."""
    # No condition: a snapshot is keyed by its content's digest, so two racing registrars write
    # the same item; removing the expiry revives a snapshot a re-registration brings back.
    return Update(
        STATE,
        snapshot_key(job_id, def_hash),
        condition=(),
        label="save definition",
        set={"definition": definition},
        remove=("expires_at",),
    )


def retire_definition_op(job_id: str, def_hash: str, now: int, cfg: SchedulerConfig) -> Update:
    """Let a superseded definition's snapshot expire with the runs that may still run under it."""
    return Update(
        STATE,
        snapshot_key(job_id, def_hash),
        condition=(
            exists(
                "definition",
                "a snapshot never saved (a job registered before snapshots) is not created empty",
            ),
        ),
        label="retire definition",
        set={"expires_at": retention_expiry(now, cfg)},
    )
