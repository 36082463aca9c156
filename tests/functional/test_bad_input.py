"""Inputs at the edge of what people, handlers and messages can send (issue 26, items 4-10):
each is refused at its boundary with a reason, and never fails the work of others."""

from __future__ import annotations

from typing import Any

import pytest
from harness import EFFECTS, MINUTE, T0, Counter, Env, build, job, seed_active
from jobsched.core.clock import iso_z, ms_to_dt
from jobsched.core.job import Misfire, MisfirePolicy
from jobsched.core.limits import DYNAMODB_MAX_ITEM_BYTES, RequestTooLarge, item_size
from jobsched.core.run import MAX_RUN_ID_LENGTH, RunKind, RunStatus, manual_run_id, run_id_for
from jobsched.core.state import Registration
from jobsched.core.transitions import new_run_item, snapshot_key
from jobsched.core.writes import JOBS, RUNS, STATE, Put, Update
from jobsched.services.definitions import Definitions
from jobsched.services.dispatch import Dispatcher
from jobsched.services.messages import PoisonMessage, parse_run_message
from jobsched.services.operations import BACKFILL_HORIZON_MARGIN_MS
from jobsched.services.worker import Outcome, Started
from jobsched.targets.registry import RunContext, StagedEffectsTooLarge

HOUR = 60 * MINUTE
DAY = 24 * HOUR


def _body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "v": 1,
        "run_id": run_id_for("j1", T0),
        "job_id": "j1",
        "version": 1,
        "attempt": 1,
        "scheduled_at": T0,
        "definition": job("j1").to_item(),
    }
    return {**body, **overrides}


# --- item 7: a message whose ids are no run ids is poison at parsing -----------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"run_id": "j1-2026-12-01"},  # no "@": no run's id
        {"after_run_id": "no-at-sign"},
        {"run_id": run_id_for("other", T0)},  # another job's run
        {"after_run_id": run_id_for("other", T0)},  # a link out of the job's own chain
    ],
)
def test_a_message_whose_ids_are_not_its_job_s_run_ids_is_poison(overrides: dict[str, Any]) -> None:
    assert parse_run_message(_body()).run_id == run_id_for("j1", T0)
    with pytest.raises(PoisonMessage, match="run_id"):
        parse_run_message(_body(**overrides))


# --- item 6: an over-long request id is refused before any write; one bad message never fails a batch


def test_a_request_id_too_long_for_its_run_id_is_refused_before_any_write(env: Env) -> None:
    ops = env.ops()
    long_job = "j" * 128
    ops.register(job(long_job, "rate(1 hour)"))
    before = env.state(long_job)
    with pytest.raises(ValueError, match="request id") as refused:
        ops.trigger(long_job, "r" * 300)
    assert str(MAX_RUN_ID_LENGTH) in str(refused.value)
    with pytest.raises(ValueError, match="request id"):
        ops.trigger("j" * 128, "has a space")
    assert env.state(long_job) == before  # no run joined the chain
    assert [r for r in env.runs_of(long_job) if r["kind"] == "manual"] == []
    assert env.queue.sent == []
    # The longest request id that fits is accepted.
    longest = "r" * (MAX_RUN_ID_LENGTH - len(manual_run_id(long_job, "")))
    assert ops.trigger(long_job, longest) == manual_run_id(long_job, longest)


def test_one_run_that_cannot_be_a_message_does_not_stop_the_others(env: Env) -> None:
    """A run whose message would not validate (here: an id past the message's 400 characters, as
    a trigger before this fix created) is logged and counted; every other run of the batch is
    sent, and the run keeps its dispatch lease."""
    definition = job("j1")
    good = [
        {
            **new_run_item(
                "j1",
                run_id_for("j1", T0 + i * MINUTE),
                T0 + i * MINUTE,
                definition.to_item(),
                definition.definition_hash(),
                RunKind.SCHEDULED,
                T0,
                env.cfg,
            ),
            "definition": definition.to_item(),
        }
        for i in range(3)
    ]
    bad = {**good[0], "run_id": manual_run_id("j1", "x" * 400)}
    dispatcher = Dispatcher(env.queue, env.telemetry, env.clock, Definitions(env.store, env.cfg))
    assert dispatcher.dispatch([good[0], bad, good[1], good[2]]) == 1
    assert sorted(m.body["run_id"] for m in env.queue.sent) == sorted(r["run_id"] for r in good)
    (event,) = env.telemetry.named("run.message_invalid")
    assert event.correlation_id == bad["run_id"] and "run_id" in event.fields["error"]


def test_the_detector_recovers_other_runs_past_one_that_cannot_be_a_message(env: Env) -> None:
    """The issue's crash: the detector built every message of its recoveries before sending any,
    so one bad run failed every sweep, and the other jobs' runs were recorded failed."""
    ops = env.ops()
    for job_id in ("a", "b", "c" * 128):
        ops.register(job(job_id, "rate(1 hour)"))
    bad_id = manual_run_id("c" * 128, "r" * 300)
    definition = job("c" * 128, "rate(1 hour)")
    bad = new_run_item(
        "c" * 128, bad_id, T0, definition.to_item(), definition.definition_hash(), RunKind.MANUAL, T0, env.cfg
    )
    env.store.write([Put(RUNS, bad, condition=(), label="a run as a trigger before the fix made it")])
    ops.trigger("a", "ok-a")
    ops.trigger("b", "ok-b")
    env.receive_all()  # the messages were lost: the dispatch leases lapse
    env.clock.advance(env.cfg.dispatch_lease_seconds * 1000 + env.cfg.clock_skew_allowance_ms + 1)
    env.detector().run("d")
    sent = {m.body["run_id"] for m in env.queue.sent}
    assert {manual_run_id("a", "ok-a"), manual_run_id("b", "ok-b")} <= sent
    assert env.run(manual_run_id("a", "ok-a"))["status"] == "pending"
    assert env.telemetry.named("run.message_invalid")


# --- item 9: a job id equal to a definition snapshot's key --------------------------------------


def test_a_job_item_keyed_like_a_snapshot_is_reported_invalid_and_leaves_the_snapshot(env: Env) -> None:
    env.ops().register(job("x", "rate(1 hour)"))
    digest = env.state("x")["def_hash"]
    snapshot = env.store.get(STATE, snapshot_key("x", digest))
    assert snapshot is not None
    colliding = snapshot_key("x", digest)["job_id"]
    env.store.write([Put(JOBS, {**job("x", "rate(1 hour)").to_item(), "job_id": colliding}, (), "person")])
    assert env.registrar().apply(colliding) is Registration.INVALID
    item = env.job_item(colliding)
    assert item is not None and item["status"] == "invalid"
    assert any(reason.startswith("job_id") for reason in item["invalid_reasons"])
    assert env.store.get(STATE, snapshot_key("x", digest)) == snapshot  # untouched
    assert env.registrar().apply(colliding) is Registration.UNCHANGED  # its own report: no loop
    # Any other id outside the pattern gets no state item either: only its report.
    env.store.write([Put(JOBS, {**job("y").to_item(), "job_id": "has space"}, (), "person")])
    assert env.registrar().apply("has space") is Registration.INVALID
    assert env.store.get(STATE, {"job_id": "has space"}) is None


# --- item 8: a job item near the item size limit still gets its reasons -------------------------


def _huge_invalid_item(job_id: str, size: int) -> dict[str, Any]:
    """An invalid job item of about ``size`` bytes: an unknown attribute holds the bulk, and many
    fields are wrong, so the full report (20 reasons of up to 300 characters) is large too."""
    item: dict[str, Any] = {
        **job(job_id).to_item(),
        "timezone": "Mars/" + "x" * 400,
        "retry": {"max_attempts": 99, "bogus": "y" * 400},
        **{f"unknown_{i}": "z" * 350 for i in range(25)},
    }
    item["blob"] = "b" * (size - item_size(item) - len("blob"))
    assert item_size(item) == size
    return item


def test_the_reasons_reach_the_person_when_the_full_report_would_not_fit() -> None:
    # In memory: moto refuses items past its own 405,000-byte count.
    with build("memory") as env:
        _the_reasons_reach_the_person(env)


def _the_reasons_reach_the_person(env: Env) -> None:
    item = _huge_invalid_item("big", DYNAMODB_MAX_ITEM_BYTES - 1_000)  # the full report adds ~1,700
    env.store.write([Put(JOBS, item, (), "person")])
    assert env.registrar().apply("big") is Registration.INVALID  # no exception: delivered once
    reported = env.job_item("big")
    assert reported is not None and reported["status"] == "invalid"
    (reason,) = reported["invalid_reasons"]
    assert "too large" in reason and "bytes" in reason
    assert item_size(reported) <= DYNAMODB_MAX_ITEM_BYTES
    assert env.registrar().apply("big") is Registration.UNCHANGED  # its own report: no loop


def _one_reason_item(job_id: str, size: int) -> dict[str, Any]:
    """An invalid job item of ``size`` bytes with one reason (an unknown attribute holds the bulk):
    its full report is smaller than the short "too large" one."""
    item: dict[str, Any] = {**job(job_id).to_item(), "blob": ""}
    item["blob"] = "b" * (size - item_size(item))
    assert item_size(item) == size
    return item


@pytest.mark.parametrize("under", [150, 175, 200, 250, 300, 350])
def test_an_item_just_under_the_limit_gets_the_largest_report_that_fits(under: int) -> None:
    """Issue 34 item 5: 150-350 bytes under 400 KB, the short "too large" report (longer than
    the one reason it replaces) does not fit. The person gets the full one-reason report where
    it fits (from ~165 bytes under), else the status alone with the reason in the log: never
    nothing. In memory: moto refuses items past its own 405,000-byte count."""
    with build("memory") as env:
        item = _one_reason_item("near", DYNAMODB_MAX_ITEM_BYTES - under)
        env.store.write([Put(JOBS, item, (), "person")])
        assert env.registrar().apply("near") is Registration.INVALID
        reported = env.job_item("near")
        assert reported is not None and reported["status"] == "invalid"
        assert item_size(reported) <= DYNAMODB_MAX_ITEM_BYTES
        logged = env.telemetry.named("job.report_too_large")
        if under >= 175:
            (reason,) = reported["invalid_reasons"]
            assert reason.startswith("blob: unknown field") and not logged
        else:
            assert "invalid_reasons" not in reported
            (event,) = logged
            assert event.fields["reasons"][0].startswith("blob: unknown field")
        assert env.registrar().apply("near") is Registration.UNCHANGED  # its own report: no loop


def test_a_report_the_store_refuses_for_its_size_falls_back_to_the_next(env: Env) -> None:
    """A store that counts sizes its own way (moto: 405,000 bytes) refuses the largest report:
    the next one that fits is written."""
    item = _huge_invalid_item("big", 400_000)  # the full report (20 reasons) adds ~1,700 bytes
    env.store.write([Put(JOBS, item, (), "person")])
    store_update = env.store.update

    def refuses_over_401k(op: Update) -> Any:
        if op.label == "report registration" and item_size({**item, **op.set}) > 401_000:
            raise RequestTooLarge("the store counts it over its limit")
        return store_update(op)

    env.store.update = refuses_over_401k  # type: ignore[method-assign]
    assert env.registrar().apply("big") is Registration.INVALID
    reported = env.job_item("big")
    assert reported is not None and reported["status"] == "invalid"
    (reason,) = reported["invalid_reasons"]
    assert "too large" in reason and "First of its 20 reasons" in reason


def test_an_item_too_large_for_any_report_is_logged_with_its_reasons() -> None:
    """DynamoDB accepts an item up to 400 KB (409,600 bytes); one within a few bytes of that
    cannot carry even the short report. The reasons go to the log; the record is not failed."""
    with build("memory") as env:
        item = _huge_invalid_item("full", DYNAMODB_MAX_ITEM_BYTES - 10)
        env.store.write([Put(JOBS, item, (), "person")])
        env.registrar().apply("full")
        assert env.job_item("full") == item  # nothing could be added
        (event,) = env.telemetry.named("job.report_too_large")
        assert event.fields["reasons"] and "bytes" in event.fields["error"]


def test_the_item_size_limit_is_dynamodb_s_400_kb() -> None:
    """ "All size measurements in DynamoDB use binary-based units [...] 1 KB = 1024 bytes"; an
    item's size counts its attribute names and values (DynamoDB developer guide, Constraints)."""
    assert DYNAMODB_MAX_ITEM_BYTES == 400 * 1024
    with build("memory") as env:
        env.store.write([Put(JOBS, {"job_id": "a", "b": "x" * (409_600 - len("job_ida") - 1)}, (), "fits")])
        with pytest.raises(RequestTooLarge, match=r"409600|400 KB"):
            env.store.write([Put(JOBS, {"job_id": "a", "b": "x" * (409_600 - len("job_ida"))}, (), "over")])


# --- item 10: staged effects past DynamoDB's limits fail the run finally, with the limit named ---


class Stager:
    """A handler that stages what it is given; ``swallow`` catches the staging error."""

    def __init__(self, items: list[dict[str, Any]], swallow: bool = False) -> None:
        self.items = items
        self.swallow = swallow
        self.calls = 0

    def __call__(self, ctx: RunContext) -> None:
        self.calls += 1
        try:
            for item in self.items:
                ctx.stage_put(EFFECTS, item)
        except StagedEffectsTooLarge:
            if not self.swallow:
                raise


def _run_once_due(env: Env, handler: Any) -> list[str]:
    env.registry.add("stager", handler)
    seed_active(env, job("s", "rate(1 hour)", target="stager"), T0)
    env.trigger().tick("t")
    return [o.value for o in env.drain(env.worker(), rounds=3)]


@pytest.mark.parametrize(
    ("items", "limit"),
    [
        ([{"pk": f"e{i}"} for i in range(100)], "99 staged effects"),  # 100 - the run's own commit
        ([{"pk": "big", "blob": "x" * DYNAMODB_MAX_ITEM_BYTES}], "400 KB"),
        ([{"pk": f"e{i}", "blob": "x" * 300_000} for i in range(14)], "4 MB"),
    ],
    ids=["count", "item", "total"],
)
@pytest.mark.parametrize("swallow", [False, True], ids=["raised", "swallowed"])
def test_staged_effects_past_the_limits_fail_the_run_once_with_the_limit_named(
    env: Env, items: list[dict[str, Any]], limit: str, swallow: bool
) -> None:
    stager = Stager(items, swallow)
    assert _run_once_due(env, stager) == ["failed"]
    assert stager.calls == 1  # a deterministic failure is not retried
    run = env.run(run_id_for("s", T0))
    assert run["status"] == "failed" and limit in run["last_error"]
    assert env.effects() == []


def test_an_effect_the_store_refuses_for_its_size_at_commit_fails_the_run_finally(env: Env) -> None:
    """An update's item is unknown when it is staged: if the commit is refused for its size, the
    run fails with that reason at once (it was retried, then recovered as "stopped heartbeating")."""
    env.store.write([Put(EFFECTS, {"pk": "grow", "blob": "x" * 350_000}, (), "an effect row")])

    def grow(ctx: RunContext) -> None:
        ctx.stage_update(EFFECTS, {"pk": "grow"}, set={"more": "y" * 70_000})

    assert _run_once_due(env, grow) == ["failed"]
    run = env.run(run_id_for("s", T0))
    assert run["status"] == "failed" and "size" in run["last_error"]
    assert "more" not in (env.store.get(EFFECTS, {"pk": "grow"}) or {})


# --- item 4: a backfill never reaches back past the run records' retention -----------------------


def test_a_backfill_before_the_retention_horizon_is_refused_naming_it(env: Env) -> None:
    """Run records expire (``expires_at``, HistoryRetentionDays): an occurrence older than that
    may have run and lost its record, and a backfill would run it again."""
    ops = env.ops()
    ops.register(job("d", "rate(1 day)", overlap="allow"))
    retention = env.cfg.history_retention_days * DAY
    horizon = T0 - retention + BACKFILL_HORIZON_MARGIN_MS
    with pytest.raises(ValueError, match="retention") as refused:
        ops.backfill("d", ms_to_dt(T0 - retention - 3 * DAY), ms_to_dt(T0 - retention + 3 * DAY))
    assert iso_z(horizon) in str(refused.value)
    assert env.runs_of("d") == []  # refused whole, before any write
    within = ops.backfill("d", ms_to_dt(horizon), ms_to_dt(horizon + 3 * DAY))
    assert len(within.created) == 3


# --- item 5: a backfill runs every occurrence it asks for, one after another ---------------------


def _missed_hours(env: Env, job_id: str, hours: int, **fields: Any) -> list[str]:
    """A job whose last ``hours`` hourly occurrences were missed (an outage, misfire skip); the
    occurrence due now has run."""
    definition = job(job_id, "rate(1 hour)", misfire=Misfire(policy=MisfirePolicy.SKIP), **fields)
    seed_active(env, definition, T0 - hours * HOUR)
    env.detector().run("d")
    assert env.drain(env.worker()) == [Outcome.SUCCEEDED]  # T0's, within its grace
    missed = [run_id_for(job_id, T0 - h * HOUR) for h in range(hours, 0, -1)]
    assert [env.run(r)["status"] for r in missed] == ["missed"] * hours
    return missed


@pytest.mark.parametrize("overlap", ["skip", "buffer_one"])
def test_a_backfill_runs_each_occurrence_one_after_another(env: Env, overlap: str) -> None:
    """The issue: under ``skip``, the second backfilled run started while the first ran and was
    recorded skipped; a later backfill then counted it as run. Backfill runs wait their turn."""
    counter = Counter()
    env.registry.add("t", counter)
    missed = _missed_hours(env, "k", 3, overlap=overlap)
    counter.calls.clear()
    result = env.ops().backfill("k", ms_to_dt(T0 - 4 * HOUR), ms_to_dt(T0 - 30 * MINUTE))
    assert result.rerun == missed
    assert result.outcomes == dict.fromkeys(missed, "rerun (was missed)")
    messages = {m.run_id: m for m in map(parse_run_message, env.receive_all())}
    worker = env.worker()
    deadline = env.clock.now_ms() + 900_000
    first = worker.begin(messages[missed[0]], deadline)
    assert isinstance(first, Started)
    # The others are delivered while the first runs: they wait, none is skipped.
    assert worker.process(messages[missed[1]], deadline) is Outcome.BUFFERED
    assert worker.process(messages[missed[2]], deadline) is Outcome.BUFFERED
    assert worker.finish(first, worker.execute(first)) is Outcome.SUCCEEDED
    assert [o.value for o in env.drain(worker, rounds=3)] == ["succeeded", "succeeded"]
    assert counter.calls == missed  # each once, in order
    again = env.ops().backfill("k", ms_to_dt(T0 - 4 * HOUR), ms_to_dt(T0 - 30 * MINUTE))
    assert again.outcomes == dict.fromkeys(missed, "ran already: succeeded")


def test_a_backfill_run_waits_behind_a_running_scheduled_run(env: Env) -> None:
    """A backfill run whose turn a scheduled run holds waits behind it; the scheduled run's worker
    (a ``skip`` job's) does not look for it, so the miss detector promotes it once that run has
    ended and the waiting run's lease lapsed."""
    counter = Counter()
    env.registry.add("t", counter)
    (missed,) = _missed_hours(env, "m", 1)
    counter.calls.clear()
    env.clock.set(T0 + HOUR)
    env.trigger().tick("t")  # claims T0 + 1 h
    worker = env.worker()
    deadline = env.clock.now_ms() + 900_000
    (scheduled,) = [parse_run_message(b) for b in env.receive_all()]
    running = worker.begin(scheduled, deadline)
    assert isinstance(running, Started)
    env.ops().backfill("m", ms_to_dt(T0 - 2 * HOUR), ms_to_dt(T0 - 30 * MINUTE))
    assert env.drain(worker) == [Outcome.BUFFERED]
    assert worker.finish(running, worker.execute(running)) is Outcome.SUCCEEDED
    env.clock.advance(env.cfg.dispatch_lease_seconds * 1000 + env.cfg.clock_skew_allowance_ms + 1)
    env.detector().run("d2")
    assert env.drain(worker) == [Outcome.SUCCEEDED]
    assert counter.calls == [scheduled.run_id, missed]


def test_a_backfill_reruns_a_legacy_cancelled_record(env: Env) -> None:
    """A ``cancelled`` record (written by releases before issue 25, a change's fence) never ran:
    a backfill runs it, as a missed one."""
    counter = Counter()
    env.registry.add("t", counter)
    env.ops().register(job("c", "rate(1 hour)"))
    fenced = run_id_for("c", T0 - HOUR)
    record = new_run_item(
        "c",
        fenced,
        T0 - HOUR,
        None,
        "h",
        RunKind.SCHEDULED,
        T0 - HOUR,
        env.cfg,
        status=RunStatus.CANCELLED,
        reason="job paused before it ran",
    )
    env.store.write([Put(RUNS, record, (), "a legacy fence")])
    result = env.ops().backfill("c", ms_to_dt(T0 - 2 * HOUR), ms_to_dt(T0 - 30 * MINUTE))
    assert result.outcomes == {fenced: "rerun (was cancelled)"}
    assert [o.value for o in env.drain(env.worker())] == ["succeeded"]
    assert counter.calls == [fenced]
