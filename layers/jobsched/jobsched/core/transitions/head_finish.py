"""The end of a finite job's life under the successor claim (HC5; docs/proposals/
successor-claim-build.md §1 row "delete after completion", §3 HC5; being modelled: the model's
``writes_mis.py`` end marker).

The last claim of a ``max_runs``, ``at()`` or ``end`` job puts the **end marker** at its head's
``next_key`` (``<job>@end:<instant of the last head>#<epoch>``) instead of a next head, and does
not touch the state: the state still reads ``active``. The **finish write** copies the marker to
the state: ``active`` → ``finished``, with the life's count (``runs_claimed``), the chain's end
(``latest_run_id``: the last run) and ``through`` (its instant), conditional on the state as read
(``_state_as_read``: a change since, e.g. a raise of ``max_runs``, heads a new life and moves the
version) and on the marker being there (a ConditionCheck, ``_end_marker_written``). The trigger
follows its put with it; the reconcile pass repairs a lost one (level-triggered). Until it lands,
every reader applies ``reads_as_finished``: "active, no head, end marker" is finished.

``status = finished`` then stays the condition of the delete after completion
(``register.delete_after_completion_ops``), unchanged.

The end marker's attributes (``head_claim.end_marker_item``, a settle chunk's ``_end_marker``):
``runs_claimed`` (the life's scheduled runs, the last one's included; only where the life counts
them, ``max_runs``), ``after_run_id`` (the chain's end: the last run) and ``last_run_at`` (the
last occurrence's instant); ``end_run_id`` gives its key.

**Read the state first, then the job's items** (HC12's Query), and finish only when they read as
finished. A change that heads a new life (a raise of ``max_runs``) then either lands before the
items are read (its head is seen: no finish) or after the state was read (its version fails
``_state_as_read``). Read the other way round, a state read after such a change would pass, and
the marker, which never goes away, would pass its check too. This holds for the trigger's finish
after its own put of the marker as much as for the reconcile pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobsched.core.head import epoch_of, is_end_marker
from jobsched.core.head_change import CHAIN_END, EPOCH, RUNS_CLAIMED, THROUGH
from jobsched.core.run import parse_run_id, run_key
from jobsched.core.state import JobStatus
from jobsched.core.transitions.conditions import StateItem, _end_marker_written, _state_as_read
from jobsched.core.writes import RUNS, STATE, Check, Item, Update, WriteOp

# The finish write's transaction: the state and the check of the marker.
FINISH_ITEMS = 2


def ends_live_life(state: Mapping[str, Any] | None, end_marker: Mapping[str, Any] | None) -> bool:
    """Whether ``end_marker`` ended the state's live timing: an end marker made in the epoch of the
    state's last change (``head_change.EPOCH``; the version for a state without one: the finish
    write and redate raise the version alone). An older one (an earlier life, a timing a later
    change replaced, a ``max_runs`` raised since) says nothing of the job now. The same rule as
    the change's (``head_change._ends_live_timing``)."""
    if state is None or end_marker is None or not is_end_marker(end_marker):
        return False
    live = state.get(EPOCH, state.get("version"))
    return live is not None and epoch_of(end_marker) == int(live)


def reads_as_finished(
    state: Mapping[str, Any] | None, head: Mapping[str, Any] | None, end_marker: Mapping[str, Any] | None
) -> bool:
    """The rule every reader uses (HC5): a job is finished if its state says so, or if the state
    says ``active``, the job has no head and its live life's end marker is written (its last
    claim landed, the finish write not yet)."""
    if state is None:
        return False
    if state.get("status") == JobStatus.FINISHED.value:
        return True
    return (
        state.get("status") == JobStatus.ACTIVE.value and head is None and ends_live_life(state, end_marker)
    )


def status_as_read(
    state: Mapping[str, Any], head: Mapping[str, Any] | None, end_marker: Mapping[str, Any] | None
) -> str:
    """The job's status as a reader shows it: the state's, or ``finished`` by ``reads_as_finished``."""
    if reads_as_finished(state, head, end_marker):
        return JobStatus.FINISHED.value
    return str(state["status"])


def finish_life_ops(state: StateItem, end_marker: Mapping[str, Any], now: int) -> list[WriteOp]:
    """The finish write: the state ``active`` → ``finished``, copying the end marker's count
    (``runs_claimed``, where the life counts its runs), chain end (``latest_run_id``, the state's
    while the job has no head) and last instant (``through``); conditional on the state's version
    as read and on the marker at its key. Refuses (``ValueError``) a state that is not active, an
    item that is not an end marker of this job, and a marker of another epoch than the state's
    live one (``ends_live_life``)."""
    if state.get("status") != JobStatus.ACTIVE.value:
        raise ValueError(
            f"job {state['job_id']}: only an active state is finished, not {state.get('status')}"
        )
    marker_id = str(end_marker["run_id"])
    parts = parse_run_id(marker_id)
    if parts.kind != "end" or parts.job_id != state["job_id"] or not is_end_marker(end_marker):
        raise ValueError(f"{marker_id}: not an end marker of job {state['job_id']}")
    if not ends_live_life(state, end_marker):
        raise ValueError(
            f"{marker_id}: an end marker of epoch {epoch_of(end_marker)}, not of the state's live "
            f"epoch {state.get(EPOCH, state.get('version'))}: a later change started another life"
        )
    sets: Item = {
        "status": JobStatus.FINISHED.value,
        "version": int(state["version"]) + 1,
        "updated_at": now,
        THROUGH: max(int(end_marker["last_run_at"]), int(state.get(THROUGH) or 0)),
    }
    if end_marker.get(RUNS_CLAIMED) is not None:
        sets[RUNS_CLAIMED] = int(end_marker[RUNS_CLAIMED])
    if end_marker.get("after_run_id") is not None:
        sets[CHAIN_END] = str(end_marker["after_run_id"])
    return [
        Update(
            STATE,
            {"job_id": state["job_id"]},
            condition=(_state_as_read(state),),
            label="finish the job's life",
            set=sets,
        ),
        Check(RUNS, run_key(marker_id), condition=(_end_marker_written(),), label="end marker written"),
    ]
