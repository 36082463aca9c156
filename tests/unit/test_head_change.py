"""The successor claim's change transaction and first registration (core/head_change.py,
core/transitions/head_change.py; build plan §1 rows "change" and "first registration", §3 HC1,
HC2, HC5, HC10), applied to the product's in-memory store: the worked examples of the plan, and
for each condition part the race it stops (each test below fails when its part is removed)."""

from __future__ import annotations

from typing import Any

import pytest
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed
from jobsched.core.head import HeadJob, ends_life, head_check_delay_ms, head_item, is_head
from jobsched.core.head_change import (
    HeadChangePlan,
    LegacyState,
    ReadAgain,
    SettleFirst,
    plan_head_change,
)
from jobsched.core.job import JobDefinition
from jobsched.core.limits import DYNAMODB_MAX_TRANSACTION_ITEMS
from jobsched.core.run import end_run_id, run_id_for
from jobsched.core.state import Registration
from jobsched.core.transitions.head_change import (
    CLOSE_LABEL,
    MARKER_LABEL,
    after_lost_change,
    head_change_ops,
)
from jobsched.core.transitions.head_claim import claim_head_op
from jobsched.core.transitions.head_settle import settle_head_ops
from jobsched.core.writes import RUNS, STATE, Cond, Item, Put, Update, WriteOp
from jobsched_tools.fakes.memory_store import MemoryStore

CFG = SchedulerConfig()
T0 = 1_796_083_200_000  # 2026-12-01T00:00:00Z: every rate's occurrences fall on its multiples
MINUTE = 60_000


def at(minutes: float) -> int:
    return T0 + int(minutes * MINUTE)


def key(minutes: float, epoch: int) -> str:
    return run_id_for("j", at(minutes), epoch)


def definition(**changes: Any) -> JobDefinition:
    fields: dict[str, Any] = {"job_id": "j", "schedule": "rate(5 minutes)", "target": "t"}
    fields.update(changes)
    return JobDefinition(**fields)


class Job:
    """One job on the in-memory store, changed by a registrar that reads the state and the head
    (HC12: the timed ``scheduled`` item whose successor key is empty) and writes the change."""

    def __init__(self) -> None:
        self.store = MemoryStore()

    def state(self) -> Item | None:
        return self.store.get(STATE, {"job_id": "j"})

    def runs(self) -> dict[str, Item]:
        return {run_id: item for (_, run_id), item in self.store.tables[RUNS].items()}

    def run(self, run_id: str) -> Item:
        item = self.runs()[run_id]
        return item

    def heads(self) -> list[Item]:
        runs = self.runs()
        return [item for item in runs.values() if is_head(item, runs.get(str(item.get("next_key"))))]

    def head(self) -> Item | None:
        found = self.heads()
        assert len(found) <= 1, found
        return found[0] if found else None

    def end_marker(self) -> Item | None:
        ends = [item for item in self.runs().values() if item["status"] == "end"]
        return ends[-1] if ends else None

    def plan(
        self, d: JobDefinition | None, now: int, digest: str | None = "set", **kw: Any
    ) -> HeadChangePlan | SettleFirst | ReadAgain:
        digest = d.definition_hash() if d is not None and digest == "set" else digest
        state = self.state()
        head = self.head() if "head" not in kw else kw.pop("head")
        return plan_head_change("j", state, head, d, digest, now, CFG, end_marker=self.end_marker(), **kw)

    def change(self, d: JobDefinition | None, now: int, digest: str | None = "set") -> HeadChangePlan:
        plan = self.plan(d, now, digest)
        assert isinstance(plan, HeadChangePlan), plan
        self.write(plan, now)
        return plan

    def write(self, plan: HeadChangePlan, now: int, drop: tuple[str, ...] = ()) -> list[WriteOp]:
        ops = without(head_change_ops(plan, now, CFG), drop)
        assert len(ops) <= 4 <= DYNAMODB_MAX_TRANSACTION_ITEMS  # a plain change: 4 items at most
        self.store.write(ops)
        return ops

    def claim(self, now: int) -> Item:
        """The trigger's claim of the head (d1claim's ``claim_head_op``): one put at its successor
        key, the next head in its epoch, or the end marker of its life's last run."""
        head = self.head()
        assert head is not None
        put = claim_head_op(head, now, "tick", CFG)
        self.store.write([put])
        return put.item


def without(ops: list[WriteOp], tags: tuple[str, ...]) -> list[WriteOp]:
    """The ops with the condition parts of these tags removed (the mutants of the pair tests)."""

    def kept(conds: tuple[Cond, ...]) -> tuple[Cond, ...]:
        return tuple(c for c in conds if c.why.split(":", 1)[0] not in tags)

    out: list[WriteOp] = []
    for op in ops:
        if isinstance(op, Put):
            out.append(Put(op.table, op.item, kept(op.condition), op.label))
        elif isinstance(op, Update):
            out.append(Update(op.table, op.key, kept(op.condition), op.label, op.set, op.remove))
        else:
            out.append(op)
    return out


def registered(d: JobDefinition, now: int) -> Job:
    job = Job()
    job.change(d, now)
    return job


# --- first registration ---------------------------------------------------------------------


def test_a_first_registration_is_the_state_and_the_head_at_epoch_1_through_now() -> None:
    job = Job()
    plan = job.change(definition(), at(1))
    assert plan.outcome is Registration.SCHEDULED and plan.epoch == 1
    assert plan.close is None and plan.marker is None
    state, head = job.state(), job.head()
    assert state is not None and head is not None
    assert head["run_id"] == key(5, 1) and head["through"] == at(1) and "after_run_id" not in head
    assert head["next_key"] == key(10, 1) and head["def_hash"] == definition().definition_hash()
    assert state["version"] == 1 and state["status"] == "active" and state["head_at"] == at(5)
    assert state["through"] == at(1)


def test_two_first_registrations_make_one_head() -> None:
    """``change.state_absent``: two registrars read no state for one job, each with its own read of
    the job item (a person's quick edit between them): the second loses, or the job has two heads."""
    job = Job()
    first = job.plan(definition(), at(2))
    second = job.plan(definition(schedule="rate(10 minutes)"), at(6))
    assert isinstance(first, HeadChangePlan) and isinstance(second, HeadChangePlan)
    job.write(first, at(2))
    with pytest.raises(ConditionFailed) as lost:
        job.write(second, at(6))
    assert lost.value.op.table == STATE
    assert [h["run_id"] for h in job.heads()] == [key(5, 1)]


def test_a_legacy_state_is_converted_first() -> None:
    legacy = {"job_id": "j", "version": 9, "status": "active", "next_run_at": at(5)}
    with pytest.raises(LegacyState):
        plan_head_change("j", legacy, None, definition(), "h", at(1), CFG)


# --- HC1: a retime's new head --------------------------------------------------------------------


def test_hc1_every_5_minutes_becomes_every_10_with_the_head_at_00_10() -> None:
    job = registered(definition(), at(0))  # head 00:05#1
    job.claim(at(4))  # 00:05 claimed: the head is 00:10#1, through 00:05
    plan = job.change(definition(schedule="rate(10 minutes)"), at(6))
    assert plan.epoch == 2 and plan.close is not None and plan.close.head["run_id"] == key(10, 1)
    runs = job.runs()
    assert runs[key(10, 1)]["status"] == "cancelled"  # not due under its timing
    assert "check_at" not in runs[key(10, 1)] and "lease_shard" not in runs[key(10, 1)]  # out of due
    assert runs[key(15, 1)]["status"] == "closed" and runs[key(15, 1)]["closed_by"] == 2
    assert runs[key(15, 1)]["closes_epoch"] == 1 and "expires_at" in runs[key(15, 1)]  # history
    head = job.head()
    assert head is not None and head["run_id"] == key(10, 2)
    # The new head waits behind the closed head's chain end (a cancelled head holds no turn, W10).
    assert head["after_run_id"] == key(5, 1) and head["through"] == at(5)
    assert runs[key(5, 1)]["status"] == "scheduled"  # claimed: it runs as claimed
    state = job.state()
    assert state is not None and state["version"] == 2 and state["latest_run_id"] == key(5, 1)
    assert state["through"] == at(5) and state["head_at"] == at(10)


def test_hc1_a_retime_to_150_s_after_a_claim_heads_after_the_claimed_occurrence() -> None:
    job = registered(definition(), at(0))
    job.claim(at(4))  # 00:05 claimed
    job.change(definition(schedule="rate(150 seconds)"), at(4.5))
    head = job.head()
    # After max(now 00:04:30, through 00:05): 00:07:30, not 00:05 again (run twice).
    assert head is not None and head["run_id"] == key(7.5, 2)
    assert head["next_key"] == key(10, 2)  # not the cancelled 00:10#1: epochs never meet
    assert job.run(key(10, 1))["status"] == "cancelled"
    assert not any(r["scheduled_at"] == at(5) for r in job.runs().values() if r.get("epoch") == 2)


def test_the_epoch_is_above_every_epoch_read() -> None:
    """A registrar that read the state before a racing change and the head after it: its epoch is
    above the head's (from the state alone it would name the racing change's head key), and its
    state condition fails: it reads again (the model's ``retime-there-and-back``)."""
    job = registered(definition(), at(0))
    stale_state = job.state()
    job.change(definition(schedule="rate(10 minutes)"), at(1))  # epoch 2, head 00:10#2
    plan = plan_head_change(
        "j", stale_state, job.head(), definition(), definition().definition_hash(), at(2), CFG
    )
    assert isinstance(plan, HeadChangePlan) and plan.epoch == 3
    with pytest.raises(ConditionFailed) as lost:
        job.write(plan, at(2))
    assert lost.value.op.table == STATE


# --- HC2: pause and resume ------------------------------------------------------------------------


def test_hc2_a_resume_before_the_cancelled_instant_heads_it_again_in_the_new_epoch() -> None:
    job = registered(definition(), at(0))  # head 00:05#1, through 00:00
    pause = job.change(definition(enabled=False), at(2))
    assert pause.outcome is Registration.PAUSED and pause.new_head is None and pause.epoch == 2
    assert job.run(key(5, 1))["status"] == "cancelled" and job.run(key(10, 1))["status"] == "closed"
    assert job.heads() == []
    state = job.state()
    assert state is not None and state["status"] == "paused" and "head_at" not in state
    assert state["through"] == at(0)
    resume = job.change(definition(), at(4))
    assert resume.epoch == 3
    head = job.head()
    assert head is not None and head["run_id"] == key(5, 3)  # 00:05 runs, as today


def test_hc2_a_resume_after_the_instant_heads_beside_the_marker() -> None:
    job = registered(definition(), at(0))
    job.change(definition(enabled=False), at(2))
    job.change(definition(), at(6))
    head = job.head()
    assert head is not None and head["run_id"] == key(10, 3)
    assert job.run(key(10, 1))["status"] == "closed"  # a marker, not a record: one live record


def test_hc2_a_pause_after_a_claim_closes_the_next_and_the_resume_heads_after_the_claim() -> None:
    job = registered(definition(), at(0))
    job.claim(at(1))  # 00:05 claimed before the pause
    job.change(definition(enabled=False), at(2))
    assert job.run(key(10, 1))["status"] == "cancelled" and job.run(key(15, 1))["status"] == "closed"
    job.change(definition(), at(4))
    head = job.head()
    assert head is not None and head["run_id"] == key(10, 3) and head["after_run_id"] == key(5, 1)


# --- HC10, delete, invalid -------------------------------------------------------------------------


def test_hc10_an_edit_that_keeps_the_timing_heads_the_same_instant_in_a_new_epoch() -> None:
    job = registered(definition(), at(0))
    edited = definition(description="now described")
    plan = job.change(edited, at(2))
    assert plan.outcome is Registration.SCHEDULED and plan.epoch == 2
    assert job.run(key(5, 1))["status"] == "cancelled" and job.run(key(10, 1))["status"] == "closed"
    head = job.head()
    assert head is not None and head["run_id"] == key(5, 2)
    assert head["def_hash"] == edited.definition_hash() != definition().definition_hash()


def test_re_registering_the_same_item_writes_nothing() -> None:
    job = registered(definition(), at(0))
    plan = job.plan(definition(), at(2))
    assert isinstance(plan, HeadChangePlan) and plan.outcome is Registration.UNCHANGED
    assert head_change_ops(plan, at(2), CFG) == []
    paused = registered(definition(enabled=False), at(0))
    again = paused.plan(definition(enabled=False), at(2))
    assert isinstance(again, HeadChangePlan) and not again.writes


def test_a_delete_closes_the_head_and_a_re_creation_is_a_change_in_a_new_life() -> None:
    job = registered(definition(max_runs=5), at(0))
    job.claim(at(4))  # 00:05 claimed: 1 run of the life
    delete = job.change(None, at(6), digest=None)
    assert delete.outcome is Registration.DELETED and delete.new_head is None
    assert job.run(key(10, 1))["status"] == "cancelled" and job.heads() == []
    state = job.state()
    assert state is not None and state["status"] == "deleted" and state["runs_claimed"] == 1
    assert state["latest_run_id"] == key(5, 1) and state["through"] == at(5)
    again = job.change(definition(max_runs=5), at(7))
    assert again.epoch == 3
    head = job.head()
    assert head is not None and head["run_id"] == key(10, 3) and head["runs_before"] == 0
    assert head["after_run_id"] == key(5, 1)  # the chain outlives the life
    state = job.state()
    assert state is not None and state["life"] == 2 and "runs_claimed" not in state


def test_an_invalid_item_closes_the_head_and_makes_none() -> None:
    job = registered(definition(), at(0))
    plan = job.plan(None, at(2), digest="broken", invalid_reason="schedule: no")
    assert isinstance(plan, HeadChangePlan) and plan.outcome is Registration.INVALID
    job.write(plan, at(2))
    assert job.heads() == [] and job.run(key(5, 1))["status"] == "cancelled"
    state = job.state()
    assert state is not None and state["status"] == "invalid" and state["def_hash"] == "broken"


# --- a due head ------------------------------------------------------------------------------------


def test_a_pause_meeting_the_one_due_occurrence_closes_it_missed() -> None:
    """The overdue head (00:05, the change at 00:06) is decided missed, with the pause's reason,
    in the change itself: exactly what the settle would record."""
    job = registered(definition(), at(0))
    plan = job.change(definition(enabled=False), at(6))
    assert plan.close is not None and plan.close.status.value == "missed"
    missed = job.run(key(5, 1))
    assert missed["status"] == "missed" and missed["reason"] == "job paused before it ran"
    assert "check_at" not in missed and "expires_at" in missed
    assert job.run(key(10, 1))["status"] == "closed" and job.heads() == []
    delete = registered(definition(), at(0))
    delete.change(None, at(6), digest=None)
    assert delete.run(key(5, 1))["reason"] == "job deleted before it ran"


def test_a_change_meeting_a_due_head_settles_it_first() -> None:
    """The model's rule (model_mis ``apply_change``): a retime meeting a due head settles it under
    the old misfire policy first; a pause meeting more than one due occurrence records them all
    missed by the settle first. The change is then planned against the head the settle left."""
    job = registered(definition(), at(0))
    retime = job.plan(definition(schedule="rate(10 minutes)"), at(6))
    assert isinstance(retime, SettleFirst) and retime.head["run_id"] == key(5, 1)
    assert retime.settlement.until == at(6) and retime.settlement.reason is None
    pause = job.plan(definition(enabled=False), at(11))
    assert isinstance(pause, SettleFirst) and pause.settlement.reason == "job paused before it ran"
    # After the settle (its next head 00:10#1, through 00:05), the change closes that head.
    settled_head = head_item(
        HeadJob.of_definition(definition()),
        at(10),
        1,
        through=at(5),
        shard_count=CFG.shard_count,
        check_delay_ms=head_check_delay_ms(CFG),
    )
    after = job.plan(definition(schedule="rate(10 minutes)"), at(6), head=settled_head)
    assert isinstance(after, HeadChangePlan) and after.close is not None
    assert after.close.status.value == "cancelled" and after.new_head is not None
    assert after.new_head["run_id"] == key(10, 2)


def apply_change(job: Job, d: JobDefinition | None, now: int, digest: str | None = "set") -> HeadChangePlan:
    """The registrar's loop as a later wave wires it (the model's ``apply_change`` in model_mis.py):
    plan; settle a due head first with the settle chunks (d1claim's ``settle_head_ops``, at the
    change's time); write; after a lost race, plan again against the head the failure showed."""
    hint: dict[str, Any] = {}
    for _ in range(6):
        plan = job.plan(d, now, digest, **hint)
        hint = {}
        if isinstance(plan, SettleFirst):
            head: Item | None = plan.head
            while head is not None:
                chunk = settle_head_ops(head, plan.settlement.until, CFG)
                job.store.write(chunk.ops)
                head = chunk.next_head if chunk.more else None
            continue
        assert isinstance(plan, HeadChangePlan), plan
        try:
            job.write(plan, now)
        except ConditionFailed as lost:
            decision = after_lost_change(plan, lost.op.label, lost.current)
            if decision.head is not None:
                hint = {"head": decision.head}
            continue
        return plan
    raise AssertionError("the change never applied")


def test_a_retime_meeting_a_due_head_settles_it_then_closes_the_head_the_settle_left() -> None:
    job = registered(definition(), at(0))  # head 00:05#1, run_once, grace 60 s
    plan = apply_change(job, definition(schedule="rate(10 minutes)"), at(5.5))
    assert plan.close is not None and plan.close.head["run_id"] == key(10, 1)
    late = job.run(key(5, 1))
    assert late["status"] == "scheduled" and late["reason"] == "late within grace"  # runs late
    assert job.run(key(10, 1))["status"] == "cancelled" and job.run(key(15, 1))["status"] == "closed"
    head = job.head()
    assert head is not None and head["run_id"] == key(10, 2) and head["after_run_id"] == key(5, 1)


def test_a_pause_meeting_two_due_occurrences_settles_both_first() -> None:
    """The settle records both 00:05 and 00:10 (the second within grace runs late); a pause in the
    change alone would have decided 00:05 and left 00:10 with no record (model_mis finding 1)."""
    job = registered(definition(misfire={"policy": "skip"}), at(0))
    plan = apply_change(job, definition(misfire={"policy": "skip"}, enabled=False), at(10.5))
    assert plan.outcome is Registration.PAUSED and plan.close is not None
    assert job.run(key(5, 1))["status"] == "missed" and job.run(key(10, 1))["status"] == "scheduled"
    assert job.run(key(15, 1))["status"] == "cancelled" and job.run(key(20, 1))["status"] == "closed"
    assert job.heads() == []


def test_the_loop_closes_the_successor_of_a_claim_that_landed_first() -> None:
    job = registered(definition(), at(0))
    stale = job.plan(definition(enabled=False), at(2))
    job.claim(at(2))
    assert isinstance(stale, HeadChangePlan)
    with pytest.raises(ConditionFailed):
        job.write(stale, at(2))
    apply_change(job, definition(enabled=False), at(2))
    assert job.run(key(10, 1))["status"] == "cancelled" and job.heads() == []


def test_a_change_is_dated_when_it_was_made() -> None:
    """Seen at 00:06 but made at 00:04 (its stream record's time, ``change_time``): 00:05 was not
    due under the old timing when the change was made, so it is cancelled, not settled, and the
    new timing's first occurrence after 00:04 heads it (overdue: the trigger claims it late)."""
    job = registered(definition(), at(0))
    plan = job.plan(definition(schedule="rate(2 minutes)"), at(6), changed_at=at(4))
    assert isinstance(plan, HeadChangePlan) and plan.close is not None
    assert plan.close.status.value == "cancelled" and plan.new_head is not None
    assert plan.new_head["run_id"] == key(6, 2) and plan.state_set["changed_at"] == at(4)


def test_an_active_state_without_a_head_reads_again() -> None:
    job = registered(definition(), at(0))
    assert isinstance(job.plan(definition(enabled=False), at(2), head=None), ReadAgain)


# --- HC5: max_runs raised and lowered --------------------------------------------------------------


def test_hc5_raising_max_runs_carries_the_count_to_the_new_head() -> None:
    job = registered(definition(max_runs=3), at(0))
    job.claim(at(4))
    job.claim(at(9))  # 00:05, 00:10 claimed: the head 00:15 is the last (2 + 1 = 3)
    head = job.head()
    assert head is not None and head["runs_before"] == 2 and ends_life(head)
    job.change(definition(max_runs=5), at(11))
    new = job.head()
    assert new is not None and new["run_id"] == key(15, 2) and new["runs_before"] == 2
    assert not ends_life(new)
    # The old last head's end key is closed: its claim can never end the life.
    assert job.run(end_run_id("j", at(15), 1))["status"] == "closed"


def test_hc5_lowering_max_runs_to_the_count_reached_finishes_the_job_without_a_head() -> None:
    job = registered(definition(max_runs=3), at(0))
    job.claim(at(4))
    job.claim(at(9))
    plan = job.change(definition(max_runs=2), at(11))
    assert plan.outcome is Registration.FINISHED and plan.new_head is None
    assert job.heads() == [] and job.run(key(15, 1))["status"] == "cancelled"
    state = job.state()
    assert state is not None and state["status"] == "finished" and state["runs_claimed"] == 2


def test_hc5_lowering_max_runs_above_the_count_makes_the_new_head_the_last() -> None:
    job = registered(definition(max_runs=5), at(0))
    job.claim(at(4))
    job.change(definition(max_runs=2), at(6))
    head = job.head()
    assert head is not None and head["runs_before"] == 1 and ends_life(head)


def test_hc5_raising_max_runs_of_a_finished_life_heads_after_its_last_run() -> None:
    """The life ended with its claim of 00:05 (the end marker; the state still says active until
    the finish write). Raised at 00:04:30, before that run's instant, the new head is after the
    last run (the end marker's ``through``), not 00:05 again."""
    job = registered(definition(max_runs=1), at(0))
    job.claim(at(4))  # the end marker: the life's one run is 00:05
    assert job.heads() == [] and job.end_marker() is not None
    plan = job.change(definition(max_runs=3), at(4.5))
    assert plan.epoch == 2
    head = job.head()
    assert head is not None and head["run_id"] == key(10, 2) and head["runs_before"] == 1
    assert head["after_run_id"] == key(5, 1) and head["through"] == at(5)


def test_hc5_a_finished_state_raised_after_the_finish_write_counts_from_its_end_marker() -> None:
    """The finish write (d2adhoc's) raised the state's version without a new epoch: the end marker
    of the state's epoch is still its life's end, and its count and last run carry."""
    job = registered(definition(max_runs=1), at(0))
    job.claim(at(4))
    state = job.state()
    assert state is not None
    finish = {"status": "finished", "version": int(state["version"]) + 1, "runs_claimed": 1}
    job.store.write([Update(STATE, {"job_id": "j"}, (), "finish", set=finish)])
    job.change(definition(max_runs=2), at(4.5))
    head = job.head()
    assert head is not None and head["run_id"] == key(10, 3) and head["runs_before"] == 1
    assert ends_life(head)  # 1 + 1 = 2: its run is the raised life's last


def test_an_end_marker_of_an_earlier_timing_does_not_stand_for_a_missing_head() -> None:
    """The head query found no head but an end marker of an epoch the state has left (the life
    ended, then a raise headed it again): a read that missed the head, to make again. Taken for
    the life's end, a pause would land beside the live head: a paused job with a head (H1)."""
    job = registered(definition(max_runs=1), at(0))
    job.claim(at(4))
    job.change(definition(max_runs=3), at(6))  # epoch 2, head 00:10#2
    old_end = job.end_marker()
    assert old_end is not None and old_end["epoch"] == 1
    missed_read = job.plan(definition(max_runs=3, enabled=False), at(7), head=None)
    assert isinstance(missed_read, ReadAgain)
    pause = job.plan(definition(max_runs=3, enabled=False), at(7))
    assert isinstance(pause, HeadChangePlan) and pause.close is not None


# --- the registrar's decision when it loses --------------------------------------------------------


def test_a_claim_that_lands_first_fails_the_marker_and_the_change_closes_its_successor() -> None:
    """``change.marker_absent``: the registrar read the head 00:05#1, then the tick claimed it. The
    marker's put fails (removing the part, it would overwrite the claimed run's successor: the run
    would stay claimed beside a closed head, H2); the change is planned again against 00:10#1."""
    job = registered(definition(), at(0))
    plan = job.plan(definition(schedule="rate(10 minutes)"), at(2))
    assert isinstance(plan, HeadChangePlan)
    claimed = job.claim(at(2))
    with pytest.raises(ConditionFailed) as lost:
        job.write(plan, at(2))
    assert lost.value.op.label == MARKER_LABEL
    assert job.run(key(10, 1)) == claimed and job.run(key(5, 1))["status"] == "scheduled"
    decision = after_lost_change(plan, lost.value.op.label, lost.value.current)
    assert decision.head is not None and decision.head["run_id"] == key(10, 1)
    again = job.plan(definition(schedule="rate(10 minutes)"), at(2), head=decision.head)
    assert isinstance(again, HeadChangePlan)
    job.write(again, at(2))
    assert job.run(key(10, 1))["status"] == "cancelled" and job.run(key(15, 1))["status"] == "closed"
    head = job.head()
    assert head is not None and head["run_id"] == key(10, 2) and head["after_run_id"] == key(5, 1)


def test_a_last_claim_that_lands_first_leaves_a_finished_life() -> None:
    job = registered(definition(max_runs=1), at(0))
    plan = job.plan(definition(max_runs=1, description="edited"), at(2))
    assert isinstance(plan, HeadChangePlan)
    job.claim(at(2))  # the end marker
    with pytest.raises(ConditionFailed) as lost:
        job.write(plan, at(2))
    decision = after_lost_change(plan, lost.value.op.label, lost.value.current)
    assert decision.head is None and decision.end_marker is not None
    again = job.plan(definition(max_runs=1, description="edited"), at(2), head=None)
    assert isinstance(again, HeadChangePlan) and again.outcome is Registration.FINISHED
    job.write(again, at(2))
    state = job.state()
    assert state is not None and state["status"] == "finished" and state["runs_claimed"] == 1


def test_a_relinked_head_fails_the_change_whose_chain_end_is_stale() -> None:
    """``change.head_version``: an ad-hoc run M relinked the head after the registrar read it
    (d2adhoc's write: ``after_run_id`` = M, version + 1). Without the part, the new head would
    wait behind the chain end as read and skip M (I3, the model's ``manual-retime``)."""
    job = registered(definition(), at(0))
    plan = job.plan(definition(schedule="rate(10 minutes)"), at(2))
    assert isinstance(plan, HeadChangePlan)
    head = job.run(key(5, 1))
    job.store.write(
        [
            Update(
                RUNS,
                {"job_id": "j", "run_id": key(5, 1)},
                (),
                "adhoc relink",
                set={"after_run_id": "j@manual:m", "version": int(head["version"]) + 1},
            )
        ]
    )
    with pytest.raises(ConditionFailed) as lost:
        job.write(plan, at(2))
    assert lost.value.op.label == CLOSE_LABEL
    decision = after_lost_change(plan, lost.value.op.label, lost.value.current)
    assert decision.head is not None
    again = job.plan(definition(schedule="rate(10 minutes)"), at(2), head=decision.head)
    assert isinstance(again, HeadChangePlan)
    job.write(again, at(2))
    new = job.head()
    assert new is not None and new["after_run_id"] == "j@manual:m"


def test_a_close_needs_the_head_still_scheduled() -> None:
    """``change.head_scheduled``: a head no longer ``scheduled`` at the version read is not closed.
    Not caught alone in the model (with ``change.marker_absent``, ``tick-retime``): every product
    write that takes a head out of ``scheduled`` also writes its version or its successor key, so
    ``change.head_version`` or ``change.marker_absent`` fails too. This checks the part itself."""
    job = registered(definition(), at(0))
    plan = job.plan(definition(schedule="rate(10 minutes)"), at(2))
    assert isinstance(plan, HeadChangePlan)
    close = head_change_ops(plan, at(2), CFG)[1]
    assert close.label == CLOSE_LABEL
    head = job.run(key(5, 1))
    assert all(c.holds(head) for c in close.condition)
    started = {**head, "status": "running"}
    assert not all(c.holds(started) for c in close.condition)


def test_two_changes_of_a_job_without_a_head_make_one_head() -> None:
    """``change.state_version``: a paused job, resumed by two registrars that read one state and two
    readings of the item (a resume, then a retime): without the part both land, two heads (H1; the
    model's ``paused-resume-retime``)."""
    job = registered(definition(enabled=False), at(0))
    resume = job.plan(definition(), at(2))
    retime = job.plan(definition(schedule="rate(10 minutes)"), at(2))
    assert isinstance(resume, HeadChangePlan) and isinstance(retime, HeadChangePlan)
    assert resume.epoch == retime.epoch == 2
    job.write(resume, at(2))
    with pytest.raises(ConditionFailed) as lost:
        job.write(retime, at(2))
    assert lost.value.op.table == STATE
    assert [h["run_id"] for h in job.heads()] == [key(5, 2)]


def test_new_head_free_is_caught_only_with_the_state_version_removed() -> None:
    """``change.new_head_free`` is never caught alone (build plan HC1; the model's parts table): a
    new epoch's keys are written only by the change that makes the epoch, and two changes naming
    one epoch read one state version, so ``change.state_version`` stops the second first. With both
    removed, a stale registrar's change naming the same epoch and instant overwrites the head the
    first one made, after it was claimed and started: a running run is put back to ``scheduled``."""
    job = registered(definition(enabled=False), at(0))
    first = job.plan(definition(), at(2))
    stale = job.plan(definition(description="edited"), at(2))  # the same epoch 2, head 00:05#2
    assert isinstance(first, HeadChangePlan) and isinstance(stale, HeadChangePlan)
    job.write(first, at(2))
    job.claim(at(4))
    job.store.write(
        [
            Update(
                RUNS,
                {"job_id": "j", "run_id": key(5, 2)},
                (),
                "start",
                set={"status": "running", "version": 2},
            )
        ]
    )
    for dropped in (("change.state_version",), ("change.new_head_free",)):
        with pytest.raises(ConditionFailed):
            job.write(stale, at(2), drop=dropped)  # either part alone stops it
        assert job.run(key(5, 2))["status"] == "running"
    job.write(stale, at(2), drop=("change.state_version", "change.new_head_free"))
    assert job.run(key(5, 2))["status"] == "scheduled"  # the mutant: the started run is overwritten


def test_every_change_is_within_four_items() -> None:
    job = registered(definition(), at(0))
    for d, now in (
        (definition(schedule="rate(10 minutes)"), at(1)),
        (definition(enabled=False), at(2)),
        (definition(), at(3)),
        (definition(description="x"), at(3.5)),
    ):
        plan = job.plan(d, now)
        assert isinstance(plan, HeadChangePlan)
        ops = job.write(plan, now)
        assert 1 <= len(ops) <= 4


def test_an_invalid_first_registration_makes_the_state_and_no_head() -> None:
    job = Job()
    plan = job.plan(None, at(1), digest="broken", invalid_reason="schedule: no")
    assert isinstance(plan, HeadChangePlan) and plan.outcome is Registration.INVALID
    assert [op.label for op in job.write(plan, at(1))] == ["change state"]
    state = job.state()
    assert state is not None and state["status"] == "invalid" and state["version"] == 1
    assert job.runs() == {}
    fixed = job.change(definition(), at(2))  # a change: epoch 2, the first head
    assert fixed.epoch == 2
    head = job.head()
    assert head is not None and head["run_id"] == key(5, 2) and head["through"] == at(1)


def test_the_change_carries_every_part_of_the_models_change() -> None:
    """The product's change and the model's (tools/jobsched_tools/successor/writes.py) name the same
    condition parts, by tag; a first registration adds ``change.state_absent`` (the model's
    set-up, ``register``)."""
    from jobsched_tools.successor.writes import ALL_PARTS

    job = registered(definition(), at(0))
    plan = job.plan(definition(schedule="rate(10 minutes)"), at(2))
    assert isinstance(plan, HeadChangePlan)
    tags = {c.why.split(":", 1)[0] for op in head_change_ops(plan, at(2), CFG) for c in op.condition}
    assert tags == {tag for tag in ALL_PARTS if tag.startswith("change.")}
    first = Job().plan(definition(), at(0))
    assert isinstance(first, HeadChangePlan)
    first_tags = {c.why.split(":", 1)[0] for op in head_change_ops(first, at(0), CFG) for c in op.condition}
    assert first_tags == {"change.state_absent", "change.new_head_free"}
