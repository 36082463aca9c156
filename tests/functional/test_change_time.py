"""A change is dated when the person made it, not when the registrar sees it (issue 26 item 2):
the stream record's ApproximateCreationDateTime (whole seconds) is the time the registration is
planned from, so an occurrence that came due while the change travelled is run late (or
recorded under the misfire policy), never dropped."""

from __future__ import annotations

from typing import Any

import pytest
from harness import MINUTE, T0, Env, job, scan_all, switch_to_successor
from jobsched.core.run import run_id_for
from jobsched.core.state import STREAM_RETENTION_MS, Registration
from jobsched.core.writes import JOBS, RUNS, Put

SECOND = 1000
PAUSED = "job paused before it ran"


def put(env: Env, item: dict[str, Any]) -> int:
    """A person's put-item; returns its stream record's ApproximateCreationDateTime (ms: the
    write's time rounded down to the second, as DynamoDB Streams gives it)."""
    env.store.write([Put(JOBS, item, condition=(), label="person puts job")])
    return env.clock.now_ms() // 1000 * 1000


def delivered(env: Env, job_id: str, created: int, delay_ms: int) -> Registration:
    env.clock.advance(delay_ms)
    return env.claiming_registrar().on_stream_record("INSERT", job_id, None, changed_at=created)


def record(env: Env, job_id: str, at: int) -> dict[str, Any] | None:
    return env.store.get(RUNS, {"job_id": job_id, "run_id": run_id_for(job_id, at)})


def test_an_at_job_written_just_before_its_instant_runs_late_not_never(env: Env) -> None:
    env.clock.set(T0 - 500)  # 0.5 s before the instant
    created = put(env, job("once", "at(2026-12-01T00:00:00)").to_item())
    assert delivered(env, "once", created, 800) is Registration.SCHEDULED  # seen 0.3 s after it
    run = record(env, "once", T0)
    assert run is not None and run["status"] == "pending"  # claimed at registration, 0.3 s late
    assert env.state("once")["status"] == "finished"  # its one occurrence has its record


def test_a_new_cron_job_keeps_a_first_occurrence_that_came_due_in_transit(env: Env) -> None:
    env.clock.set(T0 - 500)  # T0 is midnight: the daily job's first occurrence
    created = put(env, job("daily", "cron(0 0 * * ? *)").to_item())
    delivered(env, "daily", created, 800)
    assert record(env, "daily", T0) is not None  # not moved to the next day
    assert env.state("daily")["next_run_at"] == T0 + 24 * 60 * MINUTE


def test_a_resume_keeps_the_occurrence_that_came_due_in_transit(env: Env) -> None:
    put(env, job("r", enabled=False).to_item())
    env.claiming_registrar().apply("r")
    env.clock.set(T0 + MINUTE - 500)
    created = put(env, job("r").to_item())  # resumed 0.5 s before T0 + 1 min
    delivered(env, "r", created, 800)
    assert record(env, "r", T0 + MINUTE) is not None


def test_a_change_delivered_late_settles_the_old_timing_up_to_the_change_only(env: Env) -> None:
    # Paused at T0 + 1.5 min, delivered two minutes later: the occurrence before the pause is
    # recorded missed (it came due while active), the ones after it are not due (paused first).
    put(env, job("p").to_item())
    env.claiming_registrar().apply("p")
    env.clock.set(T0 + 90 * SECOND)
    created = put(env, job("p", enabled=False).to_item())
    assert delivered(env, "p", created, 2 * MINUTE) is Registration.PAUSED
    before = record(env, "p", T0 + MINUTE)
    assert before is not None and before["status"] in ("pending", "missed")  # claimed or recorded
    assert record(env, "p", T0 + 2 * MINUTE) is None and record(env, "p", T0 + 3 * MINUTE) is None


def test_a_replayed_old_record_cannot_date_a_later_change_before_the_last_registration(env: Env) -> None:
    created = put(env, job("j", "rate(1 hour)").to_item())
    env.claiming_registrar().on_stream_record("INSERT", "j", None, changed_at=created)
    registered_at = env.state("j")["registered_at"]
    env.clock.set(T0 + 5 * 60 * MINUTE + 30 * SECOND)
    put(env, job("j", "rate(1 minute)").to_item())  # re-timed; its own record is slow
    # A replay of the first record arrives first: the change cannot be older than the
    # registration that read the item before it, so nothing from before then becomes due...
    env.claiming_registrar().on_stream_record("MODIFY", "j", None, changed_at=created)
    assert registered_at == T0
    # ...and the new timing starts after that registration at the earliest: the hours since
    # (the re-time came 5 h later) are not back-filled as due by the stale date.
    assert env.state("j")["next_run_at"] == T0 + MINUTE  # = after registered_at: T0


def test_a_record_older_than_the_stream_keeps_records_is_dated_at_most_that_old(env: Env) -> None:
    env.clock.set(T0 + 2 * STREAM_RETENTION_MS)
    put(env, job("old", "rate(1 hour)").to_item())
    env.claiming_registrar().on_stream_record("INSERT", "old", None, changed_at=T0)
    assert env.state("old")["next_run_at"] == T0 + STREAM_RETENTION_MS + 60 * MINUTE


def test_the_registrar_function_dates_a_change_by_its_record(aws: Any) -> None:
    assert aws  # the Lambda environment (conftest.py): the handlers layer on the path, moto
    from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
    from lambda_apps import load_app

    app = load_app("registrar")
    record = DynamoDBRecord(
        {
            "eventName": "INSERT",
            "dynamodb": {"Keys": {"job_id": {"S": "x"}}, "ApproximateCreationDateTime": 1796083199},
        }
    )
    assert app.changed_at(record) == 1_796_083_199_000
    assert app.changed_at(DynamoDBRecord({"eventName": "INSERT", "dynamodb": {"Keys": {}}})) is None


# --- issue 34, item 4: a late record, after the reconcile pass applied its change -----------------


def reconciled_first(env: Env, first_seen: int) -> None:
    """The record is late, not lost: the reconcile pass sees the difference at ``first_seen`` and
    applies it a minute later, dated ``first_seen`` (the person's write is earlier)."""
    from jobsched.services.reconciler import SUSPECT_AFTER_MS

    env.clock.set(first_seen)
    env.detector().run("d1")
    env.clock.advance(SUSPECT_AFTER_MS)
    env.detector().run("d2")


def late_record(env: Env, job_id: str, created: int) -> Registration:
    """The person's record arrives now, after the pass applied its change."""
    image = env.store.get(JOBS, {"job_id": job_id})
    return env.claiming_registrar().on_stream_record("INSERT", job_id, image, changed_at=created)


def test_an_at_job_applied_by_the_pass_before_its_late_record_still_gets_its_record(env: Env) -> None:
    env.clock.set(T0 - 500)  # 0.5 s before the instant
    created = put(env, job("once", "at(2026-12-01T00:00:00)").to_item())
    reconciled_first(env, T0 + 10 * SECOND)
    assert env.state("once")["status"] == "finished"  # dated after its instant: nothing to run...
    env.clock.advance(20 * SECOND)
    late_record(env, "once", created)
    run = record(env, "once", T0)
    assert run is not None, "the occurrence after the person's write has no record"  # ...the record dates it
    assert run["status"] in ("pending", "missed")


def test_a_daily_cron_applied_by_the_pass_before_its_late_record_keeps_its_first_run(env: Env) -> None:
    env.clock.set(T0 - 500)
    created = put(env, job("daily", "cron(0 0 * * ? *)").to_item())
    reconciled_first(env, T0 + 10 * SECOND)
    assert env.state("daily")["next_run_at"] == T0 + 24 * 60 * MINUTE
    env.clock.advance(20 * SECOND)
    late_record(env, "daily", created)
    assert record(env, "daily", T0) is not None
    assert env.state("daily")["next_run_at"] == T0 + 24 * 60 * MINUTE  # its place is kept


def test_a_resume_applied_by_the_pass_before_its_late_record_keeps_its_runs(env: Env) -> None:
    """A frequent job: ticks claim its next occurrences between the pass and the record, so the
    record's runs are recorded behind the job's place, linked into its chain, invariants kept."""
    from jobsched.core import invariants
    from jobsched.core.writes import STATE
    from jobsched_tools.sim.invariants import all_items

    put(env, job("r", "rate(1 minute)", enabled=False).to_item())
    env.claiming_registrar().apply("r")
    env.clock.set(T0 + 30 * SECOND)
    created = put(env, job("r", "rate(1 minute)").to_item())  # resumed; its record is late
    reconciled_first(env, T0 + 3 * MINUTE + 10 * SECOND)  # applied at 00:04:10, dated 00:03:10
    env.trigger().tick("t")  # claims 00:05
    env.clock.advance(80 * SECOND)
    late_record(env, "r", created)
    for minute in (1, 2, 3):
        assert record(env, "r", T0 + minute * MINUTE) is not None, minute
    assert record(env, "r", T0 + 4 * MINUTE) is not None  # claimed after the pass, as before
    assert env.state("r")["changed_at"] == created
    states, runs = (all_items(env.store, table) for table in (STATE, RUNS))
    found = invariants.check(states, runs, [m.body for m in env.queue.sent])
    assert found == [], found
    again = late_record(env, "r", created)  # a replay of the record changes nothing
    assert again is Registration.UNCHANGED


def test_a_late_record_of_an_earlier_write_does_not_date_a_later_one(env: Env) -> None:
    """The record's image must be what the pass applied: a record of a write the person replaced
    before the pass saw it dates nothing (the later write's own record, or the pass's date, does)."""
    env.clock.set(T0 - 500)
    created = put(env, job("two", "cron(0 0 * * ? *)", description="first").to_item())
    earlier = env.store.get(JOBS, {"job_id": "two"})
    env.clock.set(T0 + 5 * SECOND)
    put(env, job("two", "cron(0 0 * * ? *)", description="second").to_item())
    reconciled_first(env, T0 + 10 * SECOND)
    env.clock.advance(20 * SECOND)
    env.claiming_registrar().on_stream_record("INSERT", "two", earlier, changed_at=created)
    assert record(env, "two", T0) is None  # 00:00 came before the write the pass applied


@pytest.mark.parametrize("successor", (False, True), ids=("legacy", "successor"))
def test_a_record_of_an_earlier_write_does_not_date_a_pause_made_after_it(env: Env, successor: bool) -> None:
    """A person re-puts the job at 00:00:30 (its record is late), then pauses it at 00:03:30; the
    re-put's record arrives at 00:04 and finds the paused item. The pause was made at 00:03:30 at
    the earliest: the occurrences of 00:02 and 00:03 came due while the job ran and are recorded
    (missed, "job paused before it ran"), not withdrawn by the re-put's time (chaos seed 16 of the
    heavy operator world with late records, legacy stack: ``lost_after_write``)."""
    if successor:
        switch_to_successor(env)
    put(env, job("p").to_item())
    env.claiming_registrar().apply("p")  # registered at 00:00, 00:01 claimed ahead
    env.clock.set(T0 + 30 * SECOND)
    created = put(env, job("p", description="re-put").to_item())
    earlier = env.store.get(JOBS, {"job_id": "p"})
    env.clock.set(T0 + 3 * MINUTE + 30 * SECOND)
    put(env, job("p", description="re-put", enabled=False).to_item())
    env.clock.set(T0 + 4 * MINUTE)
    registered = env.claiming_registrar().on_stream_record("MODIFY", "p", earlier, changed_at=created)
    assert registered is Registration.PAUSED
    for minute in (2, 3):
        found = [run for run in scan_all(env.store, RUNS) if run.get("scheduled_at") == T0 + minute * MINUTE]
        assert [(run["status"], run.get("reason")) for run in found] == [("missed", PAUSED)], minute
    assert env.state("p")["changed_at"] == T0 + 4 * MINUTE  # when the registrar saw the pause
