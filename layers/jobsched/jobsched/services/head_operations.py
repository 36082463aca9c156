"""The operations API on a job of the successor claim (shape f; issue 37): the manual run, the
backfill and the rerun of a missed record join the chain **through the job's head**, and the job's
view (``jobsched show``/``jobs``/``describe``) reads its position from the head
(docs/proposals/successor-claim-build.md §4 row "operations", HC3, HC11, HC12; the writes are
core/transitions/head_adhoc.py's).

Which jobs: those whose state records a change's ``epoch`` (``claim_shape.job_shape``). The
operations need no read of the stack's switch: a job has a head only once its state records an
epoch (its first registration under the switch, a change, or the conversion all write it); a
state that does not decide (no state, or one that left ``next-run`` before the switch) has no
head, and "no head" is today's path under both shapes. So with the switch off nothing here is
reached, and no read is added (the wave's rule: switch off = today).

Finding the head (HC12): the state first, then the store's strongly consistent Query of the job's
occurrence items (HC5's order: a change that heads a new life either shows its head or moves the
state's version), and ``core.occurrences.find_head``: the timed ``scheduled`` item whose successor
key holds nothing. A read showing none or several where one is expected is read again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobsched.core.claim_shape import ClaimShape, job_shape
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed
from jobsched.core.head import epoch_of, is_end_marker
from jobsched.core.head_change import CHAIN_END, EPOCH, THROUGH
from jobsched.core.occurrences import find_head, occurrence_key_range
from jobsched.core.run import RunStatus, run_key
from jobsched.core.state import JobStatus
from jobsched.core.transitions.head_adhoc import (
    BackfillStep,
    JoinRetry,
    NoHeadRead,
    adhoc_ops,
    after_join_failure,
    backfill_run_id,
    backfill_step,
    backfill_with_head_ops,
    in_epoch,
    rerun_ops,
)
from jobsched.core.transitions.head_finish import ends_live_life, finish_life_ops, status_as_read
from jobsched.core.writes import RUNS, STATE, Item, Put, WriteOp
from jobsched.ports import Store, Telemetry
from jobsched.services.paging import query_all

# Tries to join a run through the head while claims, settles and changes move it (as CHAIN_TRIES).
HEAD_TRIES = 5


def is_successor_job(state: Mapping[str, Any] | None) -> bool:
    """The job's position is a head (module docstring: the stack's switch is not needed here)."""
    return job_shape(dict(state) if state is not None else None, ClaimShape.LEGACY) is ClaimShape.SUCCESSOR


@dataclass(frozen=True)
class JobRead:
    """A successor job as read: its state, its occurrence items, its head and its live life's end
    marker (None when it has none)."""

    state: Item | None
    items: list[Item]
    head: Item | None
    end_marker: Item | None

    @property
    def status(self) -> str | None:
        """The job's status as readers show it: "active, no head, end marker" is finished (HC5)."""
        return None if self.state is None else status_as_read(self.state, self.head, self.end_marker)


def occurrence_items(store: Store, job_id: str) -> list[Item]:
    """HC12's strongly consistent Query of the job's occurrence items (every epoch's timed items,
    markers, end markers; no manual run): the store's ``OccurrenceQuery.occurrence_items``. A
    store wrapper that does not forward it (ports.py: the protocol stands beside ``Store``) is
    read the same way through the runs table's key, keeping the same range."""
    read = getattr(store, "occurrence_items", None)
    if read is not None:
        return list(read(job_id))
    low, high = occurrence_key_range(job_id)
    return [
        item
        for item in query_all(store, "runs-of-job", job_id, consistent=True)
        if low <= str(item["run_id"]) <= high
    ]


def head_of(items: Sequence[Mapping[str, Any]]) -> Item | None:
    """The job's head among its items (``core.occurrences.find_head``): None when it has none, and
    when the read shows several (it overlapped a change's transaction): the caller reads again."""
    return find_head(items).head


def live_end_marker(state: Mapping[str, Any] | None, items: Sequence[Mapping[str, Any]]) -> Item | None:
    """The end marker of the state's live life, if the job's items hold it (HC5)."""
    for item in items:
        if is_end_marker(item) and ends_live_life(state, item):
            return dict(item)
    return None


def read_job(store: Store, job_id: str, state: Item | None = None) -> JobRead:
    """The state (strongly consistent; ``state``: as the caller just read it), then the job's
    occurrence items (this order: head_finish.py's docstring, HC5)."""
    if state is None:
        state = store.get(STATE, {"job_id": job_id})
    items = occurrence_items(store, job_id) if is_successor_job(state) else []
    return JobRead(state, items, head_of(items), live_end_marker(state, items))


# --- the job's view ------------------------------------------------------------------------------


def head_view(read: JobRead) -> Item:
    """What ``Operations.get``'s view takes from a successor job (the keys today's state gives, so
    ``show``, ``jobs`` and ``describe`` print them unchanged): the position is the head's instant,
    the chain end its ``after_run_id``, the last scheduled occurrence its ``through`` (§0, "Where
    the state's attributes go"). Without a head (paused, finished, invalid) the end marker or the
    state holds what the last claim or change left there. Only attributes a definition ignores
    (``core.job.STATE_FIELDS``) enter the view: ``_definition`` and ``describe`` parse it back, so
    the life's count (``runs_before``) is not shown here, as today's view shows no count.
    """
    state = read.state or {}
    view: Item = {"status": read.status}
    head = read.head
    if head is not None:
        view["next_run_at"] = int(head["scheduled_at"])
        if head.get("after_run_id") is not None:
            view[CHAIN_END] = head["after_run_id"]
        view["last_scheduled_at"] = int(head[THROUGH]) if head.get(THROUGH) is not None else None
        return {name: value for name, value in view.items() if value is not None}
    marker = read.end_marker
    chain_end = marker.get("after_run_id") if marker is not None else None
    chain_end = chain_end if chain_end is not None else state.get(CHAIN_END)
    if chain_end is not None:
        view[CHAIN_END] = chain_end
    through = marker.get("last_run_at") if marker is not None else None
    through = through if through is not None else state.get(THROUGH, state.get("last_scheduled_at"))
    if through is not None:
        view["last_scheduled_at"] = int(through)
    return view


# --- runs that join through the head -------------------------------------------------------------


class HeadJoins:
    """The ad-hoc run, the rerun and the backfill of a successor job (module docstring)."""

    def __init__(self, store: Store, telemetry: Telemetry, cfg: SchedulerConfig) -> None:
        self._store = store
        self._telemetry = telemetry
        self._cfg = cfg

    def create_adhoc(self, run: Item, now: int) -> Item | None:
        """Create a manual run in front of the job's head (``head_adhoc.adhoc_ops``). None: created
        (``run`` holds what was written); else the run that was there already (a retried request).
        A failed relink or check (the head moved: claimed, settled, closed, relinked) reads the
        head again and relinks the one found (``after_join_failure``; HC3's ``tick-manual``)."""
        job_id = str(run["job_id"])
        for _ in range(HEAD_TRIES):
            read = read_job(self._store, job_id)
            try:
                ops = adhoc_ops(run, read.state, read.head)
            except NoHeadRead:
                self._finish_if_ended(read, now)
                continue  # the finish write landed (or the read missed the head): read again
            try:
                self._store.write(ops)
            except ConditionFailed as lost:
                if after_join_failure(ops, lost.op) is JoinRetry.MADE:
                    return lost.current or self._store.get(RUNS, run_key(str(run["run_id"]))) or {}
                continue  # the head moved: relink the head found now
            run.clear()
            run.update(_put_item(ops[0]))
            return None
        raise ValueError(f"{run['run_id']}: the job's head kept moving; try again")

    def _finish_if_ended(self, read: JobRead, now: int) -> None:
        """An active job read with its life's end marker and no head: the finish write first (HC5),
        as the trigger's and the reconcile pass's would; a lost race is theirs to have won."""
        if read.state is None or read.end_marker is None or read.head is not None:
            return
        try:
            self._store.write(finish_life_ops(read.state, read.end_marker, now))
        except (ConditionFailed, ValueError):
            return

    def backfill_plan(
        self, job_id: str, instants: Sequence[int], now: int, state: Item | None = None
    ) -> JobRead:
        """Check the whole range against the head before anything is written (HC11): an instant at
        or after the head is refused (``BackfillRefused``, its clear message), nothing written.
        ``state``: as the caller just read it (strongly), for the first read of the job."""
        for _ in range(HEAD_TRIES):
            read = read_job(self._store, job_id, state=state)
            state = None  # a read again reads the state again too
            if read.head is None and _expects_head(read):
                continue  # the read overlapped a change or a claim (HC12): read again
            if read.head is not None:
                for at in instants:
                    backfill_step(read.head, read.items, at, now)
            return read
        raise ValueError(f"job {job_id}: its head could not be read (it kept moving); try again")

    def backfill_one(
        self, run: Item, snapshot: Item, digest: str, now: int
    ) -> tuple[Item | None, str | None, str]:
        """One occurrence of a backfill (``Operations._backfill_one``'s contract): the run to
        dispatch (None: none), the status of the record that was there (None: it had none), and
        the id of the instant's record (its epoch's key, not ``run``'s legacy one).
        Each try reads the job again and decides the instant again (``backfill_step``): a record
        made or rerun by a racer since is then "ran already"."""
        job_id, at = str(run["job_id"]), int(run["scheduled_at"])
        for _ in range(HEAD_TRIES):
            read = read_job(self._store, job_id)
            step = _step(read, at, now)
            if step.outcome == "ran":
                assert step.record is not None
                return None, str(step.record.get("status")), str(step.record["run_id"])
            try:
                ops = self._backfill_ops(read, step, run, snapshot, digest, now)
            except NoHeadRead:
                self._finish_if_ended(read, now)
                continue
            try:
                self._store.write(ops)
            except ConditionFailed:
                continue  # the head moved or the instant got its record: decide it again
            if step.outcome == "rerun":
                was = str((step.record or {}).get("status"))
                rerun_id = str(step.record["run_id"]) if step.record is not None else str(run["run_id"])
                self._telemetry.event("run.rerun", rerun_id, was=was)
                return self._store.get(RUNS, run_key(rerun_id)), was, rerun_id
            created = _put_item(ops[0])
            return created, None, str(created["run_id"])
        raise ValueError(f"{run['run_id']}: the job's head kept moving; try again")

    def _backfill_ops(
        self, read: JobRead, step: BackfillStep, run: Item, snapshot: Item, digest: str, now: int
    ) -> list[WriteOp]:
        if step.outcome == "rerun":
            assert step.record is not None
            return rerun_ops(step.record, snapshot, digest, now, self._cfg, read.state, read.head)
        if read.head is not None:
            keyed = in_epoch(run, epoch_of(read.head), self._cfg.shard_count)
            assert keyed["run_id"] == backfill_run_id(read.head, step.at)
            return backfill_with_head_ops(keyed, read.head)
        # No head (paused, finished, invalid): the record joins the state's chain end, keyed in the
        # state's live epoch, in which no item was made (a change that closes the head makes none).
        keyed = in_epoch(run, _live_epoch(read.state), self._cfg.shard_count)
        return adhoc_ops(keyed, read.state, None)


def _step(read: JobRead, at: int, now: int) -> BackfillStep:
    """``backfill_step`` against the head; without one every past instant is decided (a change
    that closed the job's head decided its occurrences), so it stands in a head after ``now``."""
    head = read.head or {"job_id": (read.state or {}).get("job_id"), "scheduled_at": now + 1}
    return backfill_step(head, read.items, at, now)


def _expects_head(read: JobRead) -> bool:
    """An active job whose life has not ended has a head: a read without one missed it."""
    state = read.state or {}
    return state.get("status") == JobStatus.ACTIVE.value and read.end_marker is None


def _live_epoch(state: Mapping[str, Any] | None) -> int:
    return int((state or {}).get(EPOCH) or (state or {}).get("version") or 0)


def _put_item(op: WriteOp) -> Item:
    if not isinstance(op, Put):
        raise ValueError(f"{op.label}: not a put")
    return dict(op.item)


def is_pending_unstarted(run: Mapping[str, Any]) -> bool:
    """A manual run made and not started: a retried request sends its message again (§1's ad-hoc
    row: ``adhoc.run_absent``); the start is fenced on its version, so it starts at most once."""
    return run.get("status") == RunStatus.PENDING.value and not run.get("first_started_at")
