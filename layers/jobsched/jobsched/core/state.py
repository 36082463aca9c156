"""The scheduler's own record of a job, and how a change to the job's definition moves it.

A job has two items:

- the **job item** in the jobs table: the definition, written by people (console, ``aws dynamodb
  put-item``, the CLI, the Python API). A put-item replaces the whole item, and a person may
  delete it at any moment, so it holds nothing the scheduler cannot afford to lose. jobsched only
  writes back a report on it: ``status``, ``invalid_reasons`` and ``def_hash``;
- the **state item** in the state table: where the job's schedule stands (``next_run_at``,
  ``last_scheduled_at``), which definition it follows (``def_hash``, ``timing``, ``misfire``)
  and the end of its chain of runs (``latest_run_id``: the run the next one waits for under an
  overlap policy, services/chain.py). Only jobsched writes it, and every write is conditional on
  its ``version``. It outlives the job item: a re-created job's runs still wait for the runs of
  its earlier life.

``plan_registration`` is the registrar's rule, pure: from the state item as it is and the job
item as it now reads, the state the job should be in, and which occurrences of the old timing
must be settled (run or recorded) before the switch, so that no due occurrence disappears.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from jobsched.core.clock import dt_to_ms, ms_to_dt
from jobsched.core.job import JobDefinition, Misfire, definition_digest
from jobsched.core.run import shard_of
from jobsched.core.schedule import Schedule, parse_schedule
from jobsched.core.writes import Item

# The definition attributes that decide *when* a job's occurrences are. An edit that leaves them
# alone keeps the job's place in its schedule; one that changes them moves it.
TIMING_FIELDS = ("schedule", "timezone", "start", "end")
# State attributes that exist only while the job is active: the next-run index's keys.
INDEX_ATTRIBUTES = ("next_run_at", "sched_shard")
# DynamoDB Streams keeps a record 24 hours: no change the registrar sees is older.
STREAM_RETENTION_MS = 24 * 3600 * 1000


class JobStatus(StrEnum):
    ACTIVE = "active"  # in the next-run index
    PAUSED = "paused"  # enabled: false
    INVALID = "invalid"  # the job item cannot be scheduled; its reasons are on the job item
    FINISHED = "finished"  # the schedule has no occurrence left
    DELETED = "deleted"  # the job item is gone; the state stays for its in-flight runs


class Registration(StrEnum):
    UNCHANGED = "unchanged"
    SCHEDULED = "scheduled"
    PAUSED = "paused"
    FINISHED = "finished"
    INVALID = "invalid"
    DELETED = "deleted"
    ABSENT = "absent"
    CONFLICT = "conflict"


def timing_of(definition: JobDefinition) -> dict[str, str]:
    item = definition.to_item()
    return {name: str(item[name]) for name in TIMING_FIELDS if name in item}


def misfire_of(definition: JobDefinition) -> dict[str, Any]:
    return {**definition.misfire.model_dump(), "policy": definition.misfire.policy.value}


def state_schedule(state: Item) -> Schedule:
    """The schedule the state item follows (its own copy of the timing, not the job item's)."""
    timing = state["timing"]
    return parse_schedule(
        timing["schedule"],
        timezone=timing.get("timezone", "UTC"),
        start=_instant(timing.get("start")),
        end=_instant(timing.get("end")),
    )


def state_misfire(state: Item) -> Misfire:
    return Misfire.model_validate(state.get("misfire") or {})


def _instant(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True)
class Settlement:
    """Occurrences of the state's (old) timing from its ``next_run_at`` up to ``until`` (inclusive)
    that came due before the change and have no record yet. ``reason`` None: they meet the old
    misfire policy as if the trigger had missed them (the latest within grace run late); a reason:
    they are all recorded as missed with it (the job stops: paused, invalid, deleted)."""

    until: int
    reason: str | None


@dataclass(frozen=True)
class RegistrationPlan:
    outcome: Registration
    set: Item = field(default_factory=dict)
    remove: tuple[str, ...] = ()
    settle: Settlement | None = None
    # When the change took effect (``change_time``): written beside ``set`` as the state's
    # ``changed_at`` whenever the plan is written, never compared (it differs at every apply).
    changed_at: int | None = None

    def changes(self, state: Item | None) -> bool:
        """Whether writing the plan would change the state item (else it is already applied)."""
        if state is None:
            return True
        if self.settle is not None or any(name in state for name in self.remove):
            return True
        return any(state.get(name) != value for name, value in self.set.items())


def change_time(state: Item | None, now: int, changed_at: int | None) -> int:
    """When a change took effect, for planning it: ``changed_at`` (when the person's write made
    its stream record: DynamoDB's ``ApproximateCreationDateTime``, rounded down to the second),
    else ``now``. Never after ``now``, never earlier than a stream keeps records
    (``STREAM_RETENTION_MS``), and never before the state's last registration read the job item
    (``registered_at``): a change written before that read was in the item it read, so an older
    time can only come from a replayed record."""
    if changed_at is None:
        return now
    at = max(min(changed_at, now), now - STREAM_RETENTION_MS)
    if state is not None and isinstance(state.get("registered_at"), int):
        at = max(at, min(int(state["registered_at"]), now))
    return at


def plan_registration(
    state: Item | None,
    definition: JobDefinition | None,
    digest: str | None,
    now: int,
    shard_count: int,
    invalid_reason: str | None = None,
    changed_at: int | None = None,
) -> RegistrationPlan:
    """The state a job should be in. ``definition`` None and ``digest`` None: the job item is gone;
    ``definition`` None with a ``digest``: it is invalid (``invalid_reason`` says why, shortly).

    The change is planned at the time it was made (``change_time``), not when the registrar sees
    it: the old timing's occurrences due by then are settled, the new timing's from then on are
    due, also those that came due while the change travelled to the registrar (the trigger
    claims them late, or the miss detector settles them under the misfire policy)."""
    at = change_time(state, now, changed_at)
    life = new_life(state, digest)
    if life is None:
        return replace(_plan(state, definition, digest, at, shard_count, invalid_reason), changed_at=at)
    # A job item over a deleted state: created anew. Its new life is planned as the state will
    # be after this write (no runs counted yet), and written in the same conditional write.
    fresh = {name: value for name, value in (state or {}).items() if name not in LIFE_ATTRIBUTES}
    plan = _plan(fresh, definition, digest, at, shard_count, invalid_reason)
    return replace(
        plan,
        set={**plan.set, "life": life},
        remove=tuple(dict.fromkeys((*plan.remove, *LIFE_ATTRIBUTES))),
        changed_at=at,
    )


# What a job's life counts, and a re-created job starts again from nothing: ``max_runs``'s count.
# Its history (the runs, ``last_scheduled_at``, the chain's end) outlives it.
LIFE_ATTRIBUTES = ("runs_claimed",)


def life_of(state: Item | None) -> int:
    """Which life of its job id the state follows: 1 for the first (no ``life`` written)."""
    return int((state or {}).get("life") or 1)


def new_life(state: Item | None, digest: str | None) -> int | None:
    """The life a registration starts, or None: it goes on with the state's. A job item that
    exists over a ``deleted`` state was created anew (deleted after completion, by ``jobsched
    delete`` or by a person, and registered again): its life is the next one. The registrar
    applies a delete at once (``Operations.delete``, the delete after completion) or from the
    REMOVE record, so the state is ``deleted`` before the job item comes back."""
    if state is None or digest is None or state.get("status") != JobStatus.DELETED.value:
        return None
    return life_of(state) + 1


def _plan(
    state: Item | None,
    definition: JobDefinition | None,
    digest: str | None,
    now: int,
    shard_count: int,
    invalid_reason: str | None,
) -> RegistrationPlan:
    behind = _behind(state, now)
    if digest is None:
        if state is None:
            return RegistrationPlan(Registration.ABSENT)
        settle = Settlement(now, "job deleted before it ran") if behind else None
        return RegistrationPlan(
            Registration.DELETED, {"status": JobStatus.DELETED.value}, INDEX_ATTRIBUTES, settle
        )
    if definition is None:
        why = f"job became invalid before it ran: {invalid_reason or 'see the job item'}"[:300]
        return RegistrationPlan(
            Registration.INVALID,
            {"status": JobStatus.INVALID.value, "def_hash": digest},
            INDEX_ATTRIBUTES,
            Settlement(now, why) if behind else None,
        )
    described: Item = {"def_hash": digest, "timing": timing_of(definition), "misfire": misfire_of(definition)}
    if not definition.enabled:
        return RegistrationPlan(
            Registration.PAUSED,
            {**described, "status": JobStatus.PAUSED.value},
            INDEX_ATTRIBUTES,
            Settlement(now, "job paused before it ran") if behind else None,
        )
    if (
        definition.max_runs is not None
        and state is not None
        and int(state.get("runs_claimed") or 0) >= definition.max_runs
    ):
        # max_runs reached (issue 29): an edit or a resume does not start it again; raising
        # max_runs does. The count is the state's, so it outlives any edit.
        return RegistrationPlan(
            Registration.FINISHED,
            {**described, "status": JobStatus.FINISHED.value},
            (*INDEX_ATTRIBUTES, "catchups"),
            Settlement(now, "max_runs reached before it ran") if behind else None,
        )
    active = state is not None and state.get("status") == JobStatus.ACTIVE.value and "next_run_at" in state
    shard = shard_of(definition.job_id, shard_count)
    if active and state is not None and state.get("timing") == described["timing"]:
        # The timing is unchanged: the job keeps its place, even when it is behind (the miss
        # detector then handles what is overdue under the misfire policy, as without the edit).
        # Its shard follows ShardCount: a job on a shard that was dropped moves to a queried one.
        return RegistrationPlan(
            Registration.SCHEDULED, {**described, "status": JobStatus.ACTIVE.value, "sched_shard": shard}
        )
    # A new job, a resumed one, or a changed timing: it takes effect from its next occurrence
    # after now, and never before an occurrence already handled (so none runs twice).
    floor = int(state.get("last_scheduled_at") or 0) if state is not None else 0
    following = definition.compiled_schedule().next_after(ms_to_dt(max(now, floor)))
    settle = Settlement(now, None) if active and behind else None
    if following is None:
        return RegistrationPlan(
            Registration.FINISHED,
            {**described, "status": JobStatus.FINISHED.value},
            (*INDEX_ATTRIBUTES, "catchups"),
            settle,
        )
    return RegistrationPlan(
        Registration.SCHEDULED,
        {
            **described,
            "status": JobStatus.ACTIVE.value,
            "next_run_at": dt_to_ms(following),
            "sched_shard": shard,
        },
        ("catchups",),
        settle,
    )


def differences(job: Item, state: Item | None, shard_count: int) -> list[str]:
    """What registering the job item would change in its state, read from the two items alone:
    empty when the state follows the item (the reconciler's test, services/reconciler.py). The
    registrar writes the digest with every change it makes, so a digest that differs is a change
    the registrar has not applied (a new, edited, paused, resumed, broken or fixed job); a
    ``deleted`` state under an existing item is a re-creation; an active job on another shard
    than ShardCount gives it was registered under another ShardCount."""
    if state is None:
        return ["no state"]
    found = []
    digest = definition_digest(job)
    if state.get("def_hash") != digest:
        found.append(f"def_hash {state.get('def_hash')} -> {digest}")
    if state.get("status") == JobStatus.DELETED.value:
        found.append("status deleted -> re-created")
    if state.get("status") == JobStatus.ACTIVE.value and "next_run_at" in state:
        shard = shard_of(str(job["job_id"]), shard_count)
        if state.get("sched_shard") != shard:
            found.append(f"sched_shard {state.get('sched_shard')} -> {shard}")
    return found


def _behind(state: Item | None, now: int) -> bool:
    """The state is active and its next occurrence has come due without a record yet."""
    return (
        state is not None
        and state.get("status") == JobStatus.ACTIVE.value
        and "next_run_at" in state
        and int(state["next_run_at"]) <= now
    )


def registered_state(
    definition: JobDefinition, next_run_at: int | None, shard_count: int, now: int, version: int = 1
) -> Item:
    """A state item as the registrar leaves an active (or finished) job: for seeding tests and
    benchmarks with many jobs at once, without running the registrar for each."""
    state: Item = {
        "job_id": definition.job_id,
        "version": version,
        "status": JobStatus.ACTIVE.value if next_run_at is not None else JobStatus.FINISHED.value,
        "def_hash": definition.definition_hash(),
        "timing": timing_of(definition),
        "misfire": misfire_of(definition),
        "updated_at": now,
    }
    if next_run_at is not None:
        state["next_run_at"] = next_run_at
        state["sched_shard"] = shard_of(definition.job_id, shard_count)
    return state
