"""The late-record redate (HC4) and the reconcile pass's provisional date on a successor stack
(issue 37; core/transitions/head_redate.py, services/head_registrar.py step 5): the scenarios of
test_change_time.py's "issue 34, item 4" on a stack with the migration switch on. The pass applies
a change whose stream record is late, dated when it first saw it (``redate_floor`` on the state);
the record, when it comes, dates the change exactly and settles the occurrences between the
person's write and the pass's date behind the head (or, without one, the state's chain end)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext
from typing import Any

import pytest
from harness import KINDS, MINUTE, T0, Env, build, job
from jobsched.core import head_invariants
from jobsched.core.head import is_record
from jobsched.core.head_change import EPOCH
from jobsched.core.state import Registration
from jobsched.core.transitions.register import REDATE_FLOOR, REDATE_UNTIL
from jobsched.core.writes import JOBS, RUNS, STATE, Put
from jobsched.services.head_registrar import find_head, read_job_items
from jobsched_tools.sim.invariants import all_items

SECOND = 1000


@pytest.fixture(params=KINDS)
def senv(request: pytest.FixtureRequest) -> Iterator[Env]:
    with build(request.param, successor=True) as env:
        yield env


def put(env: Env, item: dict[str, Any]) -> int:
    """A person's put-item; returns its stream record's ApproximateCreationDateTime (ms)."""
    env.store.write([Put(JOBS, item, condition=(), label="person puts job")])
    return env.clock.now_ms() // 1000 * 1000


def reconciled_first(env: Env, first_seen: int) -> None:
    """The pass sees the difference at ``first_seen`` and applies it a minute later, dated
    ``first_seen`` (provisional)."""
    from jobsched.services.reconciler import SUSPECT_AFTER_MS

    env.clock.set(first_seen)
    env.detector().run("d1")
    env.clock.advance(SUSPECT_AFTER_MS)
    env.detector().run("d2")


def late_record(env: Env, job_id: str, created: int) -> Registration:
    image = env.store.get(JOBS, {"job_id": job_id})
    return env.claiming_registrar().on_stream_record("INSERT", job_id, image, changed_at=created)


def records_at(env: Env, job_id: str, at: int) -> list[dict[str, Any]]:
    """The live records (any epoch) of the occurrence ``at``."""
    return [i for i in read_job_items(env.store, job_id) if is_record(i) and int(i["scheduled_at"]) == at]


def head_of(env: Env, job_id: str) -> dict[str, Any]:
    found = find_head(read_job_items(env.store, job_id), env.state(job_id))
    assert found.head is not None and not found.ambiguous
    return found.head


def successor_invariants_hold(env: Env) -> None:
    states = [s for s in all_items(env.store, STATE) if EPOCH in s]
    found = head_invariants.check(states, all_items(env.store, RUNS), [m.body for m in env.queue.sent])
    assert found == [], found


def test_the_pass_marks_its_date_provisional_on_a_new_job(senv: Env) -> None:
    senv.clock.set(T0 - 500)
    put(senv, job("daily", "cron(0 0 * * ? *)").to_item())
    reconciled_first(senv, T0 + 10 * SECOND)
    state = senv.state("daily")
    assert EPOCH in state  # the successor path applied it
    assert state[REDATE_FLOOR] == 0 and state["changed_at"] == T0 + 10 * SECOND


def test_an_at_job_applied_by_the_pass_before_its_late_record_still_gets_its_record(senv: Env) -> None:
    senv.clock.set(T0 - 500)
    created = put(senv, job("once", "at(2026-12-01T00:00:00)").to_item())
    reconciled_first(senv, T0 + 10 * SECOND)
    assert senv.state("once")["status"] == "finished"  # dated after its instant: nothing to run...
    senv.clock.advance(20 * SECOND)
    late_record(senv, "once", created)
    (run,) = records_at(senv, "once", T0)  # ...the record dates it
    assert run["status"] in ("pending", "missed")
    state = senv.state("once")
    assert state["changed_at"] == created and REDATE_FLOOR not in state
    successor_invariants_hold(senv)


def test_a_daily_cron_applied_by_the_pass_before_its_late_record_keeps_its_first_run(senv: Env) -> None:
    senv.clock.set(T0 - 500)
    created = put(senv, job("daily", "cron(0 0 * * ? *)").to_item())
    reconciled_first(senv, T0 + 10 * SECOND)
    head = head_of(senv, "daily")
    assert head["scheduled_at"] == T0 + 24 * 60 * MINUTE
    senv.clock.advance(20 * SECOND)
    late_record(senv, "daily", created)
    (run,) = records_at(senv, "daily", T0)
    assert run["run_id"].endswith(f"#{head['epoch']}")  # in the head's epoch
    relinked = head_of(senv, "daily")
    assert relinked["run_id"] == head["run_id"]  # its place is kept
    assert relinked["through"] >= T0 and relinked["version"] == head["version"] + 1
    if run["status"] == "pending":
        assert relinked["after_run_id"] == run["run_id"]  # behind the record's run
    successor_invariants_hold(senv)


def test_a_resume_applied_by_the_pass_before_its_late_record_keeps_its_runs(senv: Env) -> None:
    """A frequent job: ticks claim its next occurrences between the pass and the record, so the
    record's runs are recorded behind the head as the ticks left it, invariants kept."""
    put(senv, job("r", "rate(1 minute)", enabled=False).to_item())
    senv.claiming_registrar().apply("r")
    senv.clock.set(T0 + 30 * SECOND)
    created = put(senv, job("r", "rate(1 minute)").to_item())  # resumed; its record is late
    reconciled_first(senv, T0 + 3 * MINUTE + 10 * SECOND)  # applied at 00:04:10, dated 00:03:10
    senv.trigger().tick("t")  # claims what is due ahead
    senv.clock.advance(80 * SECOND)
    late_record(senv, "r", created)
    for minute in (1, 2, 3):
        assert len(records_at(senv, "r", T0 + minute * MINUTE)) == 1, minute
    assert senv.state("r")["changed_at"] == created
    successor_invariants_hold(senv)
    again = late_record(senv, "r", created)  # a replay of the record changes nothing
    assert again is Registration.UNCHANGED
    for minute in (1, 2, 3):
        assert len(records_at(senv, "r", T0 + minute * MINUTE)) == 1, minute


def test_a_late_record_of_an_earlier_write_does_not_date_a_later_one(senv: Env) -> None:
    senv.clock.set(T0 - 500)
    created = put(senv, job("two", "cron(0 0 * * ? *)", description="first").to_item())
    earlier = senv.store.get(JOBS, {"job_id": "two"})
    senv.clock.set(T0 + 5 * SECOND)
    put(senv, job("two", "cron(0 0 * * ? *)", description="second").to_item())
    reconciled_first(senv, T0 + 10 * SECOND)
    senv.clock.advance(20 * SECOND)
    senv.claiming_registrar().on_stream_record("INSERT", "two", earlier, changed_at=created)
    assert records_at(senv, "two", T0) == []  # 00:00 came before the write the pass applied


def test_a_change_s_own_record_leaves_no_floor(senv: Env) -> None:
    """Only the pass's date is provisional: a change applied from its own record is dated
    exactly, and a later change keeps a floor the pass left, with the pass's date and digest
    aside, for the late record (tests/functional/test_redate_floor.py)."""
    senv.clock.set(T0 - 500)
    created = put(senv, job("own", "cron(0 0 * * ? *)").to_item())
    senv.claiming_registrar().on_stream_record("INSERT", "own", None, changed_at=created)
    assert REDATE_FLOOR not in senv.state("own")
    put(senv, job("floor", "cron(0 0 * * ? *)").to_item())
    reconciled_first(senv, T0 + 10 * SECOND)
    assert REDATE_FLOOR in senv.state("floor")
    dated = senv.state("floor")["changed_at"]
    put(senv, job("floor", "cron(0 1 * * ? *)").to_item())
    senv.claiming_registrar().apply("floor")
    assert REDATE_FLOOR in senv.state("floor") and senv.state("floor")[REDATE_UNTIL] == dated


def test_a_late_record_of_the_same_item_written_before_a_pause_dates_nothing(senv: Env) -> None:
    """Found by successor chaos with ``stream_late`` (seed 1): a person writes the job item again
    (A, unchanged), pauses it (B) and resumes it (A again), and the pass applies the resume
    before its record. A's first record, late, carries the item as it reads now, but was made
    before the pause was read: it is of an earlier write, and the occurrences of the pause must
    not be recorded (clamped to the floor, as today's path does, it recorded 00:02 and 00:03;
    00:01 was claimed at registration, before the pause)."""
    senv.clock.set(T0)
    put(senv, job("aba", "rate(1 minute)").to_item())
    senv.claiming_registrar().apply("aba")
    senv.clock.set(T0 + 10 * SECOND)
    first = put(senv, job("aba", "rate(1 minute)").to_item())  # the same item again: its record is late
    senv.clock.set(T0 + 30 * SECOND)
    put(senv, job("aba", "rate(1 minute)", enabled=False).to_item())
    senv.claiming_registrar().apply("aba")  # the pause, from its own record
    senv.clock.set(T0 + 3 * MINUTE + 30 * SECOND)
    put(senv, job("aba", "rate(1 minute)").to_item())  # resumed; its record is late too
    reconciled_first(senv, T0 + 3 * MINUTE + 40 * SECOND)
    assert senv.state("aba")["status"] == "active"
    senv.clock.advance(10 * SECOND)
    late_record(senv, "aba", first)
    for minute in (2, 3):
        assert records_at(senv, "aba", T0 + minute * MINUTE) == [], minute  # paused then
    successor_invariants_hold(senv)


STATE_UNCHANGED = "redate_with_head_ops:_state_unchanged"
RETIMED_AT = T0 + 2 * MINUTE


def retime_raced_into_the_redate(senv: Env, monkeypatch: pytest.MonkeyPatch, part_on: bool) -> dict[str, Any]:
    """w3floor: a retime (applied from its own record) lands between the late record's read and
    its redate; misfire ``skip``, so the record is ``missed`` and the head is not relinked: only
    the state's part stands between them. Returns the state after the record."""
    from jobsched.core.job import Misfire, MisfirePolicy
    from jobsched_tools.sim.mutants import switched_off

    skip = Misfire(policy=MisfirePolicy.SKIP)
    senv.clock.set(T0 - 500)
    created = put(senv, job("daily", "cron(0 0 * * ? *)", misfire=skip).to_item())
    reconciled_first(senv, T0 + 10 * SECOND)
    senv.clock.set(RETIMED_AT)
    original, raced = senv.store.write, []

    def racing(ops: Any) -> None:
        if not raced and ops and ops[0].label == "redate a reconciled change":
            raced.append(True)
            monkeypatch.setattr(senv.store, "write", original)
            put(senv, job("daily", "cron(0 1 * * ? *)", misfire=skip).to_item())
            senv.claiming_registrar().apply("daily")
        original(ops)

    monkeypatch.setattr(senv.store, "write", racing)
    with nullcontext() if part_on else switched_off(STATE_UNCHANGED, successor=True):
        late_record(senv, "daily", created)
    assert raced
    state = senv.state("daily")
    assert state["timing"]["schedule"] == "cron(0 1 * * ? *)"
    return state


def test_a_retime_between_the_record_s_read_and_its_write_keeps_its_date(
    senv: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record reads again and dates the floor the retime kept (00:00 ``missed``, in the new
    head's epoch); the retime's ``changed_at`` (what ``jobsched show`` and the chaos checker
    read) stays."""
    state = retime_raced_into_the_redate(senv, monkeypatch, part_on=True)
    assert state["changed_at"] == RETIMED_AT
    assert [r["status"] for r in records_at(senv, "daily", T0)] == ["missed"]
    successor_invariants_hold(senv)


def test_the_redate_s_state_part_is_caught_by_a_retime_between_its_read_and_write(
    senv: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``redate_with_head_ops:_state_unchanged`` switched off (sim/mutants.py
    ``SUCCESSOR_SWITCHABLE``): the record's write lands over the retime and sets the state's
    ``changed_at`` back to the person's first write, so the retime reads as made before 00:00."""
    state = retime_raced_into_the_redate(senv, monkeypatch, part_on=False)
    assert state["changed_at"] != RETIMED_AT
