"""The registrar's plan in the successor claim's form (shape f; issue 37, build step S6):
``plan_registration`` (core/state.py) decides the state a job should be in; this module decides
the same change as the successor claim writes it, beside today's plan, which it leaves alone.

A change of a job (an edit, a retime, a pause, a resume, a delete, an item gone invalid, a
``max_runs`` raised or lowered) is **one transaction** (``transitions/head_change.py``) of at most
four items (docs/proposals/successor-claim-build.md §1, row "change"; the model's ``change`` in
tools/jobsched_tools/successor/writes.py):

- the state, conditional on its version, takes ``version`` = the change's **epoch** E (§0 "Epoch
  keys"): ``max(state version read, the head's epoch) + 1`` (and above an end marker's epoch
  read), above every epoch the registrar read (an epoch from the state's version alone fails the
  model's ``retime-there-and-back``). It also records E as ``epoch``: the finish write and redate
  may raise ``version`` alone, and an end marker ends the live timing only in that epoch;
- the job's head N (as read, HC12) is closed: ``cancelled`` when its instant is after the change
  (not due under its timing), ``missed`` when it is not (§0 "One live record per instant");
- a closure marker at N's successor key (``next_key``), so no claim of N lands after the change
  (a claim that landed first fails the marker's put: ``after_lost_change``);
- if the job stays or becomes active, the new head: the first occurrence of the new timing after
  ``max(change time, through)`` (HC1), and after the newest instant that holds a live record of
  any epoch among the job's items (``recorded_through``; see below), at epoch E, behind N's chain
  end (``after_run_id``), with N's ``through`` and N's count (``runs_before``, HC5).

**A change never starts its timing at or before an instant that holds a live record** (today's
"never before the last occurrence with a record", I6; legacy keeps it by the key: a record at an
instant is that occurrence's, and a claim of it fails and advances past it). Under shape f an
epoch's keys are its own, so the floor is read: a backfill made while the job had no head (it
joins the state's chain, in the state's epoch) or before its head (the head's epoch, HC11) may
record an instant after the change's date when the change is dated before the backfill (a late
stream record's date, the reconcile pass's provisional one); the new head's claims and settles
would then record that instant again in epoch E (I1', chaos seeds 13 and 18 of the heavy operator
world with late records). The registrar reads the job's items with the head (HC12), and the
write holds that read: a backfill since it moved the state's version (no head: it joins the
state's chain) or the head's (it relinks it), so ``change.state_version`` or
``change.head_version`` fails and the change is planned again.

Every change closes the head, even one that keeps the timing (HC10): the head carries the
definition's digest, so nothing is rewritten in place. A first registration is the state put
where none is and the head at epoch 1, ``through`` = the change's time; a re-creation after a
delete is a change (a new epoch, a new life).

**A change that meets a due head settles it first** (the model's rule, tools/jobsched_tools/
successor/model_mis.py ``apply_change`` and writes_mis.py ``change_settles_first``): the
occurrences of the old timing that came due before the change are decided as the detector's
settle decides them, under the old misfire policy, or recorded ``missed`` with the reason of a
pause, an invalid item, a delete or a reached ``max_runs`` (docs/design.md, "What a change to a job
does"). The plan says so (``SettleFirst``); the caller settles (the settle
chunk, transitions/head_settle.py) and plans again against the head the settle left, which is
after the change. (That settle chunk decides under the policy only; a stop's reason, today's
"job paused before it ran" for every due occurrence, needs a mode it does not have yet. Until
then the caller settles under the policy, which is the model's rule: model_mis's ``outage-change``
checks a pause's settle against the policy's fates.)

Only a stop whose due head is the one occurrence due closes it ``missed`` in the change itself:
the settle would record exactly that occurrence, with the same reason, and leave a head the
change would then cancel.

Pure: no store, no clock; every time is passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.head import (
    HeadJob,
    epoch_of,
    head_check_delay_ms,
    head_item,
    is_end_marker,
    is_record,
    is_unstarted_occurrence,
)
from jobsched.core.job import JobDefinition
from jobsched.core.run import RunStatus, parse_run_id
from jobsched.core.state import (
    LIFE_ATTRIBUTES,
    JobStatus,
    Registration,
    Settlement,
    change_time,
    misfire_of,
    new_life,
    timing_of,
)
from jobsched.core.writes import Item

# The state's record of the head the last change made (§0, "Where the state's attributes go"):
# the chaos and explorer observers read it; no writer conditions on it.
HEAD_AT = "head_at"
# The state's chain end and ``through`` while the job has no head (paused, invalid, finished,
# deleted): every change copies them from the head it closes (the model's ``chain_end``).
CHAIN_END = "latest_run_id"
THROUGH = "through"
# The epoch of the state's last change: its ``version`` when the change wrote it, kept apart because
# other state writes (redate, the finish write) may raise the version (§0).
EPOCH = "epoch"
# The life's count of scheduled runs (``max_runs``), copied from the closed head (HC5).
RUNS_CLAIMED = "runs_claimed"


class LegacyState(ValueError):
    """A state written before the successor claim (it has ``next_run_at``): it is converted first
    (build plan §5, the conversion write), never changed by this plan."""


@dataclass(frozen=True)
class ClosedHead:
    """The head the change closes, as read, and what it becomes."""

    head: Item
    status: RunStatus  # CANCELLED (not due under its timing) or MISSED (due: a record)
    reason: str | None = None  # a missed head's reason


@dataclass(frozen=True)
class HeadChangePlan:
    """One change, to write as one transaction (``transitions.head_change_ops``).

    ``state`` is the state as read (None: a first registration); ``epoch`` the change's epoch,
    which is also the state's new version; ``close``, ``marker`` and ``new_head`` are each None
    when the change has none. ``outcome`` ``UNCHANGED``: the state already follows the job item,
    nothing is written."""

    outcome: Registration
    job_id: str
    state: Item | None
    epoch: int
    state_set: Item = field(default_factory=dict)
    state_remove: tuple[str, ...] = ()
    close: ClosedHead | None = None
    marker: Item | None = None
    new_head: Item | None = None

    @property
    def writes(self) -> bool:
        return self.outcome not in (Registration.UNCHANGED, Registration.ABSENT)


@dataclass(frozen=True)
class SettleFirst:
    """The head is due at the change: settle the old timing's occurrences up to ``settlement.until``
    first (under the head's misfire policy, or all ``missed`` with ``settlement.reason``), then read
    again and plan the change against the head the settle left (model_mis ``apply_change``)."""

    head: Item
    settlement: Settlement


@dataclass(frozen=True)
class ReadAgain:
    """The reads disagree: an active state with no head and no end marker (a claim, a settle or a
    change landed between the state's read and the head's, HC12). Level-triggered: read both again."""

    why: str


def plan_head_change(
    job_id: str,
    state: Item | None,
    head: Item | None,
    definition: JobDefinition | None,
    digest: str | None,
    now: int,
    cfg: SchedulerConfig,
    invalid_reason: str | None = None,
    changed_at: int | None = None,
    end_marker: Item | None = None,
    recorded: int | None = None,
) -> HeadChangePlan | SettleFirst | ReadAgain:
    """The successor form of ``plan_registration``: from the state as read, the job's head as read
    (HC12's query; None: it has none), its life's end marker if the query found one (a finished
    life whose state says ``active`` until the finish write lands, HC5), and the job item as it
    now reads (``definition``/``digest`` as ``plan_registration`` takes them), the change to write.

    The change is dated as ``plan_registration`` dates it (``change_time``): the head closes
    ``missed`` or ``cancelled`` as its instant is at or before that time or after it, and the new
    timing's first occurrence is after it (and after ``through``, and after ``recorded``: the newest
    instant holding a live record of any epoch, ``recorded_through`` of the job's items read)."""
    if state is not None and "next_run_at" in state:
        raise LegacyState(f"job {job_id}: a state from before the successor claim; convert it first")
    if state is not None and state.get("status") != JobStatus.ACTIVE.value:
        head = None  # a job without a head (its last change closed it): a head read is stale
    if head is not None and not is_unstarted_occurrence(head):
        raise ValueError(f"not a head: {head.get('run_id')!r} ({head.get('status')})")
    ended = end_marker if _ends_live_timing(state, end_marker) else None
    dated = change_time(state, now, changed_at)
    read = ChangeRead.of(state, head, end_marker, ended, digest, dated, recorded)
    target = _target(read.current, definition, digest, invalid_reason, read.count)
    if target.outcome is Registration.ABSENT:
        return HeadChangePlan(target.outcome, job_id, state, read.epoch)
    new_at = target.job.next_after(read.starts_after) if target.job is not None else None
    if target.outcome is Registration.SCHEDULED and new_at is None:
        # The new timing has no occurrence left (an at() passed, an end reached): finished. The
        # old timing's due occurrences still meet its misfire policy (no stop reason).
        target = _Target(Registration.FINISHED, {**target.sets, "status": JobStatus.FINISHED.value})
    if state is not None and state.get("status") == JobStatus.ACTIVE.value and head is None and ended is None:
        return ReadAgain(f"job {job_id}: an active state and no head: a write landed between the reads")
    if read.life is None and _unchanged(state, head, target.sets, new_at is not None, digest):
        return HeadChangePlan(Registration.UNCHANGED, job_id, state, read.epoch)
    close = _close(head, read.at, target.stop_reason) if head is not None else None
    if isinstance(close, SettleFirst):
        return close
    return _written(job_id, state, read, target, new_at, close, now, cfg)


@dataclass(frozen=True)
class ChangeRead:
    """What the registrar read, as the change uses it: the change's time and epoch, the life it
    goes on with (or the new one it starts), and what the closed head (or, without one, the end
    marker or the state) hands the new head: the count, ``through`` and the chain end; ``recorded``:
    the newest instant holding a live record of any epoch the registrar read (``recorded_through``;
    0: none)."""

    at: int
    life: int | None
    current: Item | None
    epoch: int
    count: int
    through: int
    chain_end: str | None
    recorded: int = 0

    @property
    def starts_after(self) -> int:
        """The new timing's first occurrence is after this: the change's time, the last occurrence
        decided, and the newest instant already recorded (never a second record there: I1')."""
        return max(self.at, self.through, self.recorded)

    @classmethod
    def of(
        cls,
        state: Item | None,
        head: Item | None,
        end_marker: Item | None,
        ended: Item | None,
        digest: str | None,
        at: int,
        recorded: int | None = None,
    ) -> ChangeRead:
        life = new_life(state, digest)
        current = state if state is None or life is None else _fresh(state)
        # Above every epoch read (§0): the state's version, the head's, the end marker's.
        epochs = [int((state or {}).get("version") or 0)]
        epochs += [epoch_of(item) for item in (head, end_marker) if item is not None]
        return cls(
            at,
            life,
            current,
            max(epochs) + 1,
            _count(current, head, ended, life is not None),
            _through(current, head, ended, at),
            _chain_end(current, head, ended),
            recorded or 0,
        )


def recorded_through(items: Iterable[Mapping[str, Any]], head: Mapping[str, Any] | None) -> int | None:
    """The newest instant that holds a live record of any epoch among the job's items (HC12's read):
    a run or a record of an occurrence (a backfill's, a redate's, a settle's, a claimed run), not
    ``head`` (the head the change closes), not a marker or a cancelled head, not a manual run (it
    is no occurrence). None: none. The change's new head comes after it (the module's docstring)."""
    instants = [
        instant
        for item in items
        if is_record(item)
        and (head is None or item.get("run_id") != head.get("run_id"))
        and (instant := _timed_instant(item)) is not None
    ]
    return max(instants, default=None)


def _timed_instant(item: Mapping[str, Any]) -> int | None:
    """The occurrence's instant of a timed item (any epoch); None for a manual run or an end key."""
    try:
        parts = parse_run_id(str(item["run_id"]))
    except (KeyError, ValueError):
        return None
    return parts.instant_ms if parts.kind == "timed" else None


def _written(
    job_id: str,
    state: Item | None,
    read: ChangeRead,
    target: _Target,
    new_at: int | None,
    close: ClosedHead | None,
    now: int,
    cfg: SchedulerConfig,
) -> HeadChangePlan:
    """The change's items: the state's attributes, the closure marker and the new head."""
    sets: Item = {**target.sets, "version": read.epoch, EPOCH: read.epoch, THROUGH: read.through}
    sets.update({"registered_at": now, "changed_at": read.at})
    remove: list[str] = []
    if read.chain_end is not None:
        sets[CHAIN_END] = read.chain_end
    present = state or {}
    if read.life is not None:
        sets["life"] = read.life
        remove += LIFE_ATTRIBUTES  # a new life counts its runs from nothing
    elif read.count or RUNS_CLAIMED in present:
        sets[RUNS_CLAIMED] = read.count  # kept while the job has no head: a resume carries it (HC5)
    new_head = None
    if target.job is not None and new_at is not None:
        new_head = head_item(
            target.job,
            new_at,
            read.epoch,
            through=read.through,
            shard_count=cfg.shard_count,
            check_delay_ms=head_check_delay_ms(cfg),
            runs_before=read.count,
            after_run_id=read.chain_end,
        )
        sets[HEAD_AT] = new_at
    else:
        remove.append(HEAD_AT)
    marker = _marker(close.head, read.epoch, now) if close is not None else None
    return HeadChangePlan(
        target.outcome,
        job_id,
        state,
        read.epoch,
        sets,
        tuple(name for name in dict.fromkeys(remove) if name in present and name not in sets),
        close,
        marker,
        new_head,
    )


def _fresh(state: Item) -> Item:
    """A deleted state under a job item that exists again: the new life's state as planned, without
    the old life's count (``plan_registration`` does the same)."""
    return {name: value for name, value in state.items() if name not in LIFE_ATTRIBUTES}


def _count(state: Item | None, head: Item | None, end_marker: Item | None, new: bool) -> int:
    """The life's scheduled runs before the new head (HC5): the closed head's ``runs_before`` (its
    occurrence did not run), else the end marker's final count, else the state's copy."""
    if new:
        return 0
    if head is not None:
        return int(head.get("runs_before") or 0)
    if end_marker is not None:
        return int(end_marker.get(RUNS_CLAIMED) or 0)
    return int((state or {}).get(RUNS_CLAIMED) or 0)


def _through(state: Item | None, head: Item | None, end_marker: Item | None, at: int) -> int:
    """The last occurrence decided before the new head: the closed head's ``through`` (the model
    keeps it when the head is missed, §6), else the end marker's (its life's last run), else the
    state's (a paused job's, HC2), else the change's time (a first registration)."""
    if head is not None:
        return int(head[THROUGH])
    if end_marker is not None:
        last = end_marker.get("last_run_at")  # the claim's end marker (transitions/head_claim.py)
        return int(last) if last is not None else int(parse_run_id(str(end_marker["run_id"])).instant_ms or 0)
    if state is not None and state.get(THROUGH) is not None:
        return int(state[THROUGH])
    return at


def _ends_live_timing(state: Item | None, end_marker: Item | None) -> bool:
    """Whether the end marker the head query found ended the state's live timing: made in the epoch
    of the state's last change. An older one (an earlier life, a timing a later change replaced)
    says nothing of the job now: an active state beside it and no head is a read to make again."""
    if state is None or end_marker is None or not is_end_marker(end_marker):
        return False
    live = state.get(EPOCH, state.get("version"))
    return live is not None and epoch_of(end_marker) == int(live)


def _chain_end(state: Item | None, head: Item | None, end_marker: Item | None) -> str | None:
    """The run the new head waits behind: the closed head's ``after_run_id`` (a cancelled head holds
    no turn, W10), else the life's last run (the end marker's ``after_run_id``), else the state's."""
    if head is not None:
        found = head.get("after_run_id")
    elif end_marker is not None:
        found = end_marker.get("after_run_id") or (state or {}).get(CHAIN_END)
    else:
        found = (state or {}).get(CHAIN_END)
    return None if found is None else str(found)


@dataclass(frozen=True)
class _Target:
    """What the job item asks for, as ``plan_registration``'s outcomes: the state's new attributes,
    what an active job's heads carry, and why the old timing's due occurrences are recorded
    ``missed`` (None: they meet its misfire policy)."""

    outcome: Registration
    sets: Item
    job: HeadJob | None = None
    stop_reason: str | None = None


def _target(
    state: Item | None,
    definition: JobDefinition | None,
    digest: str | None,
    invalid_reason: str | None,
    count: int,
) -> _Target:
    """``SCHEDULED`` may still become ``FINISHED`` when the timing has no occurrence left. The stop
    reasons are docs/design.md's ("What a change to a job does")."""
    if digest is None:
        if state is None:
            return _Target(Registration.ABSENT, {})
        return _Target(
            Registration.DELETED, {"status": JobStatus.DELETED.value}, None, "job deleted before it ran"
        )
    if definition is None:
        why = f"job became invalid before it ran: {invalid_reason or 'see the job item'}"[:300]
        return _Target(
            Registration.INVALID, {"status": JobStatus.INVALID.value, "def_hash": digest}, None, why
        )
    described: Item = {"def_hash": digest, "timing": timing_of(definition), "misfire": misfire_of(definition)}
    if not definition.enabled:
        paused = {**described, "status": JobStatus.PAUSED.value}
        return _Target(Registration.PAUSED, paused, None, "job paused before it ran")
    if definition.max_runs is not None and count >= definition.max_runs:
        # A lowered limit already reached (HC5): no head; raising it above the count heads again.
        finished = {**described, "status": JobStatus.FINISHED.value}
        return _Target(Registration.FINISHED, finished, None, "max_runs reached before it ran")
    job = HeadJob.of_definition(definition, digest)
    return _Target(Registration.SCHEDULED, {**described, "status": JobStatus.ACTIVE.value}, job)


def _unchanged(state: Item | None, head: Item | None, sets: Item, active: bool, digest: str | None) -> bool:
    """The state already follows the job item: every attribute the change would set is as read,
    and an active job's head carries the digest (a head of an older digest is changed: HC10)."""
    if state is None or any(state.get(name) != value for name, value in sets.items()):
        return False
    return not active or (head is not None and head.get("def_hash") == digest)


def _close(head: Item, at: int, stop_reason: str | None) -> ClosedHead | SettleFirst:
    """How the change closes the head: ``cancelled`` if its instant is after the change (it was not
    due under its timing); if not, the head is due and is settled first, unless the change stops
    the job and the head is the one occurrence due: then it is ``missed`` here, with the reason
    the settle would record (the settle would leave a head after it, which the change cancels)."""
    if int(head["scheduled_at"]) > at:
        return ClosedHead(head, RunStatus.CANCELLED)
    next_at = head.get("next_at")
    if stop_reason is not None and (next_at is None or int(next_at) > at):
        return ClosedHead(head, RunStatus.MISSED, stop_reason)
    return SettleFirst(head, Settlement(at, stop_reason))


def _marker(head: Mapping[str, Any], epoch: int, now: int) -> Item:
    """The closure marker at the closed head's successor key (§0): no claim of the head lands there.
    It is not a record (no ``kind``); the transaction gives it its expiry, so TTL removes it with
    the history (HC14: the retention outlives any claimer of its epoch)."""
    marker: Item = {
        "job_id": head["job_id"],
        "run_id": str(head["next_key"]),
        "status": RunStatus.CLOSED.value,
        "epoch": epoch_of(head),
        "closes_epoch": epoch_of(head),
        "closed_by": epoch,
        "closed_at": now,
    }
    if head.get("next_at") is not None:
        marker["scheduled_at"] = int(head["next_at"])
    return marker
