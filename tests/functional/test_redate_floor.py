"""The reconcile pass's provisional date outlives the changes after it (w3floor; issue 34 item 4,
issue 37 HC4), on today's path and the successor's, on the in-memory store and moto.

A person's write whose stream record is late is applied by the pass, dated when it first saw it
(``redate_floor``): the occurrences between the write and that date wait for the record. Another
change applied before the record arrives (a retime, a pause) used to drop the floor, so the
record dated nothing and those occurrences were never recorded (lost silently). The change now
keeps the floor, with the pass's date and the digest it applied aside (``redate_until``,
``redate_hash``: core/transitions/register.py ``kept_redate_marks``), and the record, whose image
is the definition the pass applied, records them behind the job's place (or head); a job the
change stopped gets them ``missed``. A record of an earlier write of the same item (a re-put,
then a pause and a resume the pass applied) dates nothing on both paths (``redate_after``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from harness import KINDS, MINUTE, T0, Env, build, job
from jobsched.core import head_invariants, invariants
from jobsched.core.head import is_record
from jobsched.core.head_change import EPOCH
from jobsched.core.job import definition_digest
from jobsched.core.run import parse_run_id
from jobsched.core.transitions.register import REDATE_FLOOR, REDATE_HASH, REDATE_MARKS, REDATE_UNTIL
from jobsched.core.writes import JOBS, RUNS, STATE, Put
from jobsched_tools.sim.invariants import all_items

SECOND = 1000
PATHS = [(kind, successor) for successor in (False, True) for kind in KINDS]


@pytest.fixture(params=PATHS, ids=[f"{kind}-{'successor' if s else 'legacy'}" for kind, s in PATHS])
def penv(request: pytest.FixtureRequest) -> Iterator[Env]:
    kind, successor = request.param
    with build(kind, successor=successor) as env:
        yield env


def put(env: Env, item: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A person's put-item: its stream record's ApproximateCreationDateTime (ms) and the image."""
    env.store.write([Put(JOBS, item, condition=(), label="person puts job")])
    image = env.store.get(JOBS, {"job_id": item["job_id"]})
    assert image is not None
    return env.clock.now_ms() // 1000 * 1000, image


def reconciled_first(env: Env, first_seen: int) -> None:
    """The pass sees the difference at ``first_seen`` and applies it a minute later, dated
    ``first_seen`` (provisional)."""
    from jobsched.services.reconciler import SUSPECT_AFTER_MS

    env.clock.set(first_seen)
    env.detector().run("d1")
    env.clock.advance(SUSPECT_AFTER_MS)
    env.detector().run("d2")


def applied_from_its_own_record(env: Env, item: dict[str, Any]) -> None:
    """A person's change whose stream record comes in time."""
    created, image = put(env, item)
    env.claiming_registrar().on_stream_record("MODIFY", str(item["job_id"]), image, changed_at=created)


def live_records_at(env: Env, job_id: str, at: int) -> list[dict[str, Any]]:
    return [
        run
        for run in all_items(env.store, RUNS)
        if run["job_id"] == job_id
        and is_record(run)
        and parse_run_id(str(run["run_id"])).kind == "timed"
        and int(run["scheduled_at"]) == at
    ]


def invariants_hold(env: Env) -> None:
    states, runs = all_items(env.store, STATE), all_items(env.store, RUNS)
    sent = [m.body for m in env.queue.sent]
    if any(EPOCH in s for s in states):
        found = head_invariants.check([s for s in states if EPOCH in s], runs, sent)
    else:
        found = invariants.check(states, runs, sent)
    assert found == [], found


def test_a_retime_between_the_pass_and_the_late_record_keeps_the_record_s_occurrence(penv: Env) -> None:
    penv.clock.set(T0 - 500)
    created, image = put(penv, job("daily", "cron(0 0 * * ? *)").to_item())  # its record is late
    reconciled_first(penv, T0 + 10 * SECOND)  # 00:00 taken as not due
    penv.clock.set(T0 + 2 * MINUTE)
    applied_from_its_own_record(penv, job("daily", "cron(0 1 * * ? *)").to_item())
    kept = penv.state("daily")
    penv.clock.set(T0 + 3 * MINUTE)
    penv.claiming_registrar().on_stream_record("INSERT", "daily", image, changed_at=created)
    runs = live_records_at(penv, "daily", T0)
    assert len(runs) == 1, "00:00, due after the person's write, is never recorded"
    assert kept.get(REDATE_UNTIL) == T0 + 10 * SECOND and kept.get(REDATE_HASH) == definition_digest(image)
    (run,) = runs
    assert run["status"] in ("pending", "missed") and run["def_hash"] == definition_digest(image)
    state = penv.state("daily")
    assert state["timing"]["schedule"] == "cron(0 1 * * ? *)"  # the retime stands...
    assert state["changed_at"] == T0 + 2 * MINUTE  # ...dated as it was
    assert not any(mark in state for mark in REDATE_MARKS)
    invariants_hold(penv)
    penv.claiming_registrar().on_stream_record("INSERT", "daily", image, changed_at=created)  # a replay
    assert len(live_records_at(penv, "daily", T0)) == 1


def test_a_pause_between_the_pass_and_the_late_record_records_the_occurrence_missed(penv: Env) -> None:
    penv.clock.set(T0 - 500)
    created, image = put(penv, job("daily", "cron(0 0 * * ? *)").to_item())
    reconciled_first(penv, T0 + 10 * SECOND)
    penv.clock.set(T0 + 2 * MINUTE)
    applied_from_its_own_record(penv, job("daily", "cron(0 0 * * ? *)", enabled=False).to_item())
    kept = penv.state("daily")
    penv.clock.set(T0 + 3 * MINUTE)
    penv.claiming_registrar().on_stream_record("INSERT", "daily", image, changed_at=created)
    runs = live_records_at(penv, "daily", T0)
    assert len(runs) == 1, "00:00, due after the person's write, is never recorded"
    assert REDATE_FLOOR in kept
    (run,) = runs
    assert run["status"] == "missed" and "paused" in str(run.get("reason"))
    assert penv.state("daily")["status"] == "paused"
    invariants_hold(penv)


def test_a_floor_kept_past_the_stream_s_retention_is_dropped_by_the_next_change(penv: Env) -> None:
    penv.clock.set(T0 - 500)
    put(penv, job("daily", "cron(0 0 * * ? *)").to_item())
    reconciled_first(penv, T0 + 10 * SECOND)
    penv.clock.set(T0 + 25 * 60 * MINUTE)  # no record can come now: it is known lost
    applied_from_its_own_record(penv, job("daily", "cron(0 0 * * ? *)", enabled=False).to_item())
    assert not any(mark in penv.state("daily") for mark in REDATE_MARKS)


def test_a_late_record_of_the_same_item_written_before_a_pause_dates_nothing(penv: Env) -> None:
    """A re-put (A, unchanged) whose record is late, a pause (B) and a resume (A again) the pass
    applied: A's first record carries the item as it reads now, but was made before the pause was
    read. Today's path clamped it to the floor and recorded the pause's occurrences."""
    penv.clock.set(T0)
    put(penv, job("aba", "rate(1 minute)").to_item())
    penv.claiming_registrar().apply("aba")
    penv.clock.set(T0 + 10 * SECOND)
    first, image = put(penv, job("aba", "rate(1 minute)").to_item())  # its record is late
    penv.clock.set(T0 + 30 * SECOND)
    put(penv, job("aba", "rate(1 minute)", enabled=False).to_item())
    penv.claiming_registrar().apply("aba")  # the pause, from its own record
    penv.clock.set(T0 + 3 * MINUTE + 30 * SECOND)
    put(penv, job("aba", "rate(1 minute)").to_item())  # resumed; its record is late too
    reconciled_first(penv, T0 + 3 * MINUTE + 40 * SECOND)
    assert penv.state("aba")["status"] == "active"
    penv.clock.advance(10 * SECOND)
    penv.claiming_registrar().on_stream_record("INSERT", "aba", image, changed_at=first)
    for minute in (2, 3):
        assert live_records_at(penv, "aba", T0 + minute * MINUTE) == [], minute  # paused then
    invariants_hold(penv)


def test_a_late_record_that_applies_a_later_change_first_still_dates_the_floor(penv: Env) -> None:
    """The person paused the job after the pass, and the resume's late record comes before the
    pause's: the record applies the item as it reads now (the pause, which keeps the floor),
    then reads again and dates the pass's change (``Registrar._dates_floor``)."""
    penv.clock.set(T0 - 500)
    created, image = put(penv, job("daily", "cron(0 0 * * ? *)").to_item())
    reconciled_first(penv, T0 + 10 * SECOND)
    penv.clock.set(T0 + 2 * MINUTE)
    put(penv, job("daily", "cron(0 0 * * ? *)", enabled=False).to_item())  # its record comes later
    penv.clock.set(T0 + 3 * MINUTE)
    penv.claiming_registrar().on_stream_record("INSERT", "daily", image, changed_at=created)
    assert penv.state("daily")["status"] == "paused"
    runs = live_records_at(penv, "daily", T0)
    assert len(runs) == 1, "00:00, due after the person's write, is never recorded"
    assert runs[0]["status"] == "missed"
    invariants_hold(penv)
