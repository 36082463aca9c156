"""The named condition parts the writes share, and the attributes several writes set.

Each part is a ``Cond`` whose ``why`` says which race it stops; the writes of the other modules
of this package build their conditions from these (``sim/mutants.py`` switches each off where
a write builds it, by the write's name and the part's: ``start_op:_run_token``). The dispatch
lease and the history's expiry are set by the writes of several actors.
"""

from __future__ import annotations

from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.run import RunStatus, shard_of
from jobsched.core.state import JobStatus
from jobsched.core.writes import Cond, Item, eq, is_in, not_exists

StateItem = dict[str, Any]
RunItem = dict[str, Any]


def _state_unchanged(state: StateItem) -> Cond:
    return eq(
        "version",
        state["version"],
        "another trigger, the miss detector or the registrar moved the job's schedule since we "
        "read it (possibly from the eventually consistent index): we must not act on a stale "
        "view, e.g. claim an occurrence twice or advance past a changed schedule",
    )


def _state_as_read(state: StateItem | None) -> Cond:
    why = "the state changed since we read it (a racer, or the registrar): act on the new state instead"
    if state is None:
        return not_exists("job_id", why)
    return eq("version", state["version"], why)


def _still_active() -> Cond:
    return eq("status", JobStatus.ACTIVE.value, "a paused, invalid, finished or deleted job is not claimed")


def _next_is(occurrence: int, why: str) -> Cond:
    return eq("next_run_at", occurrence, why)


def _run_is_new() -> Cond:
    return not_exists(
        "run_id",
        "the occurrence already has a record: another trigger, a retried tick, the miss detector, "
        "the registrar or a backfill made it first. The run id is deterministic, so exactly one "
        "writer creates it",
    )


def _run_token(version: int) -> Cond:
    return eq(
        "version",
        version,
        "fencing: someone (a recovery, a duplicate delivery, another worker) moved the run on "
        "since this actor's token was issued; a stale actor's write must fail, not overwrite",
    )


def _run_status(*statuses: RunStatus) -> Cond:
    if len(statuses) == 1:
        return eq(
            "status",
            statuses[0].value,
            f"the run must still be {statuses[0].value} (not finished or moved on)",
        )
    return is_in(
        "status", [s.value for s in statuses], "the run must still be in a state this step applies to"
    )


def _dispatch_lease(run_id: str, until: int, cfg: SchedulerConfig) -> Item:
    """A lease the miss detector checks at ``check_at``, the lease index's sort key. Only the
    writes that hand a run to a new holder (claim, retry, recovery, promotion) set it; a worker's
    start and heartbeats renew ``lease_expires_at`` alone, which no index holds, so a renewal is
    one write unit. When ``check_at`` comes and the lease was renewed, the detector moves
    ``check_at`` to the lease (``recheck_op``)."""
    return {"lease_expires_at": until, "check_at": until, "lease_shard": shard_of(run_id, cfg.shard_count)}


LEASE_ATTRIBUTES = ("lease_expires_at", "check_at", "lease_shard")


def _lease_as_read(run: RunItem) -> Cond:
    return eq(
        "lease_expires_at",
        run["lease_expires_at"],
        "a heartbeat renewed the lease after we read it: the worker is alive",
    )


def _not_asked_to_stop() -> Cond:
    return not_exists(
        "cancel_requested",
        "cancel_other: a newer run asked this one to stop since the read; it must end as "
        "cancelled, never be handed to a new attempt that runs its handler again",
    )


def retention_expiry(now: int, cfg: SchedulerConfig) -> int:
    """DynamoDB TTL is in epoch seconds."""
    return now // 1000 + cfg.history_retention_days * 86_400


# --- The successor claim's parts (shape f, issue 37; docs/proposals/successor-claim-build.md §1) ---
# One function per model tag (tools/jobsched_tools/successor/writes.py ``ALL_PARTS``), the tag at
# the head of its ``why`` so the two can be matched. Nothing in the services writes with them yet.


def _successor_absent() -> Cond:
    """(model: claim.successor_absent) The claim's only condition: one plain put at the head's
    successor key. Whoever fills that key first decides the head: a racing claimer, the settle
    of the same overdue head (HC9), a change's closure marker, or this claimer's own earlier try
    (a retried tick, told apart by ``claimed_by``)."""
    return not_exists(
        "run_id",
        "claim.successor_absent: the head's successor key is filled: a racing claimer, a settle of "
        "the same head, a change's closure marker or our own retried tick decided the head first",
    )


def _head_scheduled(tag: str) -> Cond:
    """(model: settle.head_scheduled, change.head_scheduled, adhoc.head_scheduled) The head as
    read is still unstarted: ``tag`` names the write (``settle``)."""
    return eq(
        "status",
        RunStatus.SCHEDULED.value,
        f"{tag}.head_scheduled: the head was started (a late claim's run) or closed by a change "
        "since the read",
    )


def _head_version(tag: str, version: int) -> Cond:
    """(model: settle.head_version, change.head_version, adhoc.head_version) The head's version as
    read: a relink (an ad-hoc run) or a redispatch since the read must be read again."""
    return eq("version", version, f"{tag}.head_version: a relink or a redispatch of the head since the read")


def _settle_successor_absent() -> Cond:
    """(model: settle.successor_absent) The settle's first put lands on the overdue head's
    successor key: the race with a late claim of the same head (HC9). One of the two fails."""
    return not_exists(
        "run_id",
        "settle.successor_absent: a late claim of the head landed first: it runs late as "
        "claimed; read again (the head is now a claimed run)",
    )


def _missed_absent() -> Cond:
    """(model: settle.missed_absent) A settle's record after the head's successor: keyed in the
    head's epoch, which only this head's settle writes (H5'); a repeated chunk fails here."""
    return not_exists(
        "run_id",
        "settle.missed_absent: the occurrence already has a record in this epoch (a repeated "
        "or racing settle of the same head)",
    )


def _next_head_absent() -> Cond:
    """(model: settle.next_head_absent) The head a settle chunk leaves (or its end marker), when
    it is not at the settled head's successor key."""
    return not_exists(
        "run_id",
        "settle.next_head_absent: the chunk's next head exists (a repeated or racing settle of "
        "the same head)",
    )


def _redispatch_status_scheduled() -> Cond:
    """(model: redispatch.status_scheduled) A claimed run whose message was lost is sent again
    only while it is still unstarted."""
    return eq(
        "status",
        RunStatus.SCHEDULED.value,
        "redispatch.status_scheduled: a start, a change or a settle moved the run since the read",
    )


def _redispatch_version(version: int) -> Cond:
    """(model: redispatch.version) The redispatch's new token is issued once per token read."""
    return eq(
        "version",
        version,
        "redispatch.version: a relink, another detector's redispatch or a start since the read",
    )


# --- d2change: the change transaction and first registration (successor claim, shape f) -------
# docs/proposals/successor-claim-build.md §1 rows "change" and "first registration"; the model's
# ``change`` (tools/jobsched_tools/successor/writes.py), whose tags the ``why`` of each part names.
# The closed head's two parts are the shared ``_head_scheduled("change")`` and
# ``_head_version("change", ...)`` above.


def _change_state_version(state: StateItem) -> Cond:
    return eq(
        "version",
        state["version"],
        "change.state_version: another change (or the finish write) since the read: two changes "
        "naming one epoch would each make a head (model: change.state_version)",
    )


def _change_state_absent() -> Cond:
    return not_exists(
        "job_id",
        "change.state_absent: a first registration's state is made once; a racing registrar that "
        "made it first owns epoch 1 (model: register)",
    )


def _change_marker_absent() -> Cond:
    return not_exists(
        "run_id",
        "change.marker_absent: a claim landed first on the head's successor key (the head runs as "
        "claimed; read again and close its successor) (model: change.marker_absent)",
    )


def _change_new_head_free() -> Cond:
    return not_exists(
        "run_id",
        "change.new_head_free: a racing change that named the same epoch made its head here; "
        "change.state_version stops it first (model: change.new_head_free)",
    )


# --- The successor claim (issue 37): the ad-hoc relink, backfill, the finish write ------------
# Parts of the writes that join a run to the chain through the job's head (shape f,
# docs/proposals/successor-claim-build.md §1 "ad-hoc run", "rerun missed", "redate", HC3, HC4,
# HC11) and of the finish write (HC5); transitions/head_adhoc.py, head_redate.py, head_finish.py
# build them, with ``_head_scheduled`` and ``_head_version`` above for the head's relink. As
# above, the model's tag heads each ``why`` (tools/jobsched_tools/successor/writes.py,
# writes_mis.py); ``tag`` is the write's (``adhoc``, ``backfill``, ``redate``).


def _adhoc_run_absent() -> Cond:
    """(model: adhoc.run_absent) The ad-hoc run's own put: a manual run id is the request's."""
    return not_exists(
        "run_id",
        "adhoc.run_absent: the ad-hoc run exists already: a retried request (the same request id) "
        "whose earlier try landed and whose answer was lost; it is not made twice",
    )


def _backfill_record_absent() -> Cond:
    """(model: backfill.run_absent) A backfill's new record, at its instant's key in the head's
    epoch (HC11)."""
    return not_exists(
        "run_id",
        "backfill.run_absent: the instant got a record in the head's epoch since the read (a "
        "racing backfill of the same instant, or a redate's record): one record per instant",
    )


def _relink_successor_absent(tag: str) -> Cond:
    """(model: adhoc.successor_absent, backfill.successor_absent) The ConditionCheck at the
    relinked head's ``next_key``: the head is still unclaimed (HC3)."""
    return not_exists(
        "run_id",
        f"{tag}.successor_absent: a claim of the head landed since the read (tick-manual): it is a "
        "claimed run now, not the chain's end; relink the new head, so the run lies between the "
        "claimed run and its successor",
    )


def _end_marker_written() -> Cond:
    """(HC5; the model's end marker is being modelled) The finish write's ConditionCheck at the end
    marker's key."""
    return eq(
        "status",
        RunStatus.END.value,
        "finish.end_marker_written: the job's life ended only if its end marker is written: not a "
        "closure marker a settle or a change put at the end key, nor a key only inferred",
    )
