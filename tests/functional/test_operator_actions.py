"""What people do to jobs while runs are in flight (issue 12): re-put a job item whole, edit it
while it is behind, change its schedule under a running tick, store ``enabled`` as a string,
delete it with a run buffered, backfill missed occurrences, name an unknown target. Each case
once broke the promise that every due occurrence runs or is recorded; each test names it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from harness import (
    KINDS,
    MINUTE,
    T0,
    ClaimerDies,
    Counter,
    DiesAfterClaim,
    Env,
    build,
    default_cfg,
    job,
    register_raw,
)
from jobsched.core.job import Misfire, MisfirePolicy, OverlapPolicy
from jobsched.core.run import RunKind, run_id_for, run_key
from jobsched.core.state import Registration
from jobsched.core.transitions import claim_ops, new_run_item
from jobsched.core.writes import JOBS, RUNS, Put, Update, WriteOp
from jobsched.services.messages import RunMessage, parse_run_message
from jobsched.services.registrar import Registrar
from jobsched.services.worker import Outcome, Started, Worker

HOUR = 60 * MINUTE
DEADLINE = 15 * MINUTE


def short_lookahead(kind: str) -> Any:
    # Claims 10 s ahead: each tick below claims exactly the occurrence it is about.
    return build(kind, default_cfg(lookahead_seconds=10))


@pytest.fixture(params=KINDS)
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    with short_lookahead(request.param) as built:
        yield built


def put_item(env: Env, item: dict[str, Any]) -> None:
    """A person's put-item: the whole item replaced, with whatever attributes they give."""
    env.store.write([Put(JOBS, item, condition=(), label="person puts job")])


def stream(env: Env, job_id: str) -> Registration:
    """The jobs stream delivers the change to the registrar."""
    return env.registrar().apply(job_id)


def runs(env: Env, job_id: str) -> dict[int, dict[str, Any]]:
    return {int(r["scheduled_at"]): r for r in env.runs_of(job_id)}


# --- 3. a whole-item put or a delete cannot corrupt the scheduler's state ----------------------


def test_re_putting_a_skip_job_while_it_runs_does_not_start_a_second_run(env: Env) -> None:
    env.registry.add("t", Counter())
    definition = job("s", "rate(1 minute)", overlap=OverlapPolicy.SKIP)
    register_raw(env, definition.to_item())
    env.clock.set(T0 + MINUTE)
    env.trigger().tick("t1")
    (first,) = (parse_run_message(body) for body in env.receive_all())
    started = env.worker("w1").begin(first, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    before = env.state("s")
    # The README's own command, run again: the item is replaced whole, no scheduler attribute kept.
    put_item(env, definition.to_item())
    stream(env, "s")  # the report is written again; the state does not move
    assert env.state("s") == before and before["latest_run_id"] == first.run_id
    env.clock.set(T0 + 2 * MINUTE)
    env.trigger().tick("t2")
    (second,) = (parse_run_message(body) for body in env.receive_all())
    assert env.worker("w2").process(second, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    assert env.run(second.run_id)["reason"].startswith("overlap policy skip")


def holder_and_buffered(env: Env) -> tuple[Worker, Started, RunMessage, RunMessage]:
    """A buffer_one job ``b`` two occurrences behind, on one worker: the first run started (the
    holder) and the second buffered behind it."""
    register_raw(env, job("b", "rate(1 minute)", overlap=OverlapPolicy.BUFFER_ONE).to_item())
    env.clock.set(T0 + 2 * MINUTE)
    env.detector().run("late")  # T0+1min is late: the detector claims it and T0+2min with it
    env.trigger().tick("t1")
    first, second = sorted(
        (parse_run_message(body) for body in env.receive_all()), key=lambda m: m.scheduled_at
    )
    worker = env.worker()
    started = worker.begin(first, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    assert worker.process(second, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    return worker, started, first, second


def test_deleting_a_job_with_a_buffered_run_still_promotes_it(env: Env) -> None:
    counter = Counter()
    env.registry.add("t", counter)
    worker, started, first, second = holder_and_buffered(env)
    env.store.delete(JOBS, {"job_id": "b"})
    assert stream(env, "b") is Registration.DELETED
    assert worker.finish(started, worker.execute(started)) is Outcome.SUCCEEDED
    promoted = env.run(second.run_id)
    assert promoted["status"] == "pending" and "lease_expires_at" in promoted
    assert [o.value for o in env.drain(worker)] == ["succeeded"]
    assert counter.calls == [first.run_id, second.run_id]  # each once; nothing left waiting


def test_a_buffered_run_whose_holder_ended_without_promoting_it_is_promoted_by_the_detector(
    env: Env,
) -> None:
    """The safety net: every unfinished run holds a lease. A buffered run whose holder finished
    without promoting it (here: the holder's pointer to it wiped, as a worker that died between
    its commit and the promotion leaves it) is found when its lease lapses."""
    env.registry.add("t", Counter())
    worker, started, first, second = holder_and_buffered(env)
    env.store.update(Update("runs", run_key(first.run_id), (), "lose the pointer", remove=("buffered_next",)))
    assert worker.finish(started, worker.execute(started)) is Outcome.SUCCEEDED
    assert env.run(second.run_id)["status"] == "buffered"  # nobody promoted it
    env.clock.set(env.run(second.run_id)["lease_expires_at"] + env.cfg.clock_skew_allowance_ms + 1)
    result = env.detector().run("d")
    assert result.buffered_promoted == 1 and env.run(second.run_id)["status"] == "pending"
    assert [o.value for o in env.drain(worker)] == ["succeeded"]


def test_a_buffered_run_renews_its_lease_while_the_holder_runs(env: Env) -> None:
    env.registry.add("t", Counter())
    worker, started, _first, second = holder_and_buffered(env)
    lapse = env.run(second.run_id)["lease_expires_at"] + env.cfg.clock_skew_allowance_ms + 1
    env.clock.set(lapse)
    assert worker.heartbeat(started)  # the holder is alive
    result = env.detector().run("d")
    waiting = env.run(second.run_id)
    assert result.buffered_promoted == 0 and waiting["status"] == "buffered"
    assert waiting["lease_expires_at"] > lapse


# --- 4. an edit while the job is behind keeps its place --------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_an_edit_that_leaves_the_timing_alone_loses_no_occurrence(kind: str) -> None:
    with short_lookahead(kind) as env:
        misfire = Misfire(policy=MisfirePolicy.SKIP, grace_seconds=60)
        definition = job("e", "rate(1 minute)", misfire=misfire, overlap=OverlapPolicy.ALLOW)
        register_raw(env, definition.to_item())
        env.clock.set(T0 + 10 * MINUTE)  # ten minutes without a trigger
        put_item(env, {**definition.to_item(), "description": "now documented"})
        assert stream(env, "e") is Registration.SCHEDULED
        assert env.state("e")["next_run_at"] == T0 + MINUTE  # the place is kept
        env.detector().run("d")
        env.trigger().tick("t")
        recorded = runs(env, "e")
        assert sorted(t for t in recorded if t <= T0 + 10 * MINUTE) == [T0 + m * MINUTE for m in range(1, 11)]
        assert all(recorded[T0 + m * MINUTE]["status"] == "missed" for m in range(1, 9))


def test_a_timing_change_while_behind_records_what_it_skips(env: Env) -> None:
    misfire = Misfire(policy=MisfirePolicy.RUN_ONCE, grace_seconds=60)
    register_raw(env, job("c", "rate(1 minute)", misfire=misfire, overlap=OverlapPolicy.ALLOW).to_item())
    env.clock.set(T0 + 10 * MINUTE + 30_000)
    put_item(env, job("c", "rate(1 hour)", misfire=misfire, overlap=OverlapPolicy.ALLOW).to_item())
    assert stream(env, "c") is Registration.SCHEDULED
    recorded = runs(env, "c")
    assert sorted(recorded) == [T0 + m * MINUTE for m in range(1, 11)]  # every old one has a record
    statuses = [recorded[T0 + m * MINUTE]["status"] for m in range(1, 11)]
    # run_once: one catch-up for the overdue ones; the one within grace runs as a late run.
    assert statuses.count("missed") == 8 and statuses.count("pending") == 2
    assert all(r.get("reason") for r in recorded.values())
    assert env.state("c")["next_run_at"] == T0 + HOUR  # the new schedule from now
    assert {body["run_id"] for body in env.receive_all()} == {
        run_id_for("c", T0 + 9 * MINUTE),
        run_id_for("c", T0 + 10 * MINUTE),
    }


def test_pausing_and_deleting_a_job_that_is_behind_records_its_due_occurrences(env: Env) -> None:
    for job_id in ("p", "d"):
        register_raw(env, job(job_id, "rate(1 minute)").to_item())
    env.clock.set(T0 + 3 * MINUTE + 1)
    put_item(env, job("p", "rate(1 minute)", enabled=False).to_item())
    env.store.delete(JOBS, {"job_id": "d"})
    assert stream(env, "p") is Registration.PAUSED and stream(env, "d") is Registration.DELETED
    for job_id, why in (("p", "paused"), ("d", "deleted")):
        recorded = runs(env, job_id)
        assert sorted(recorded) == [T0 + m * MINUTE for m in (1, 2, 3)]
        assert all(r["status"] == "missed" and why in r["reason"] for r in recorded.values())
    # The registrar's records are counted like the detector's: the MissedRuns alarm sees them.
    assert env.telemetry.metric_sum("MissedRuns") == 6
    assert env.trigger().tick("t").claimed == 0 and env.detector().run("d").items == 0


# --- 5. a schedule change racing a tick -------------------------------------------------------


class ChangeBeforeClaim:
    """A store through which the trigger claims: just before its first claim lands, a person
    changes the job and the registrar applies it (the change races the tick)."""

    def __init__(self, env: Env, change: Any) -> None:
        self._env = env
        self._change = change

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env.store, name)

    def write(self, ops: Sequence[WriteOp]) -> None:
        if self._change is not None and any(op.label == "create run" for op in ops):
            change, self._change = self._change, None
            change()
        self._env.store.write(ops)


@pytest.mark.parametrize("kind", KINDS)
def test_a_schedule_change_racing_a_tick_runs_only_the_new_schedule(kind: str) -> None:
    """The change lands between the trigger's index read and its claim. The claim's transaction
    is conditional on the state's version, which the change moved: nothing of it lands, and the
    trigger derives everything afresh: the new schedule's occurrence with the new payload. No
    occurrence of the old schedule runs (the bug: 00:05 and 00:10, and 00:04 with the old
    payload; then 00:05 outside the job's chain)."""
    from jobsched.services.trigger import Trigger

    with build(kind) as env:  # a 90 s lookahead: the new schedule's 00:06 is inside the window
        register_raw(env, job("r", "rate(5 minutes)", payload={"v": "old"}).to_item())
        env.clock.set(T0 + 5 * MINUTE - 5_000)

        def change() -> None:
            put_item(env, job("r", "cron(6,36 * * * ? *)", payload={"v": "new"}).to_item())
            assert stream(env, "r") is Registration.SCHEDULED

        store = ChangeBeforeClaim(env, change)
        trigger = Trigger(store, env.queue, env.telemetry, env.clock, env.cfg, parallel_queries=False)  # type: ignore[arg-type]
        assert trigger.tick("t").claimed == 1
        history = runs(env, "r")
        assert sorted(history) == [T0 + 6 * MINUTE]  # not 00:05, not 00:10
        env.clock.set(T0 + 6 * MINUTE)
        payloads = {body["scheduled_at"]: body["definition"]["payload"] for body in env.receive_all()}
        assert payloads == {T0 + 6 * MINUTE: '{"v":"new"}'}
        assert env.state("r")["next_run_at"] == T0 + 36 * MINUTE  # the new schedule's next


@pytest.mark.parametrize("kind", KINDS)
def test_a_pause_after_a_claim_landed_runs_the_claimed_occurrence_once(kind: str) -> None:
    """The claim (one transaction) landed and its claimer died before sending; then a person
    pauses the job. The claimed run is in the job's chain already and runs once, as claimed:
    a change takes effect from the first occurrence not yet claimed. The pause's write is
    conditional on the state as the registrar read it, after the claim."""
    from jobsched.services.trigger import Trigger

    with build(kind) as env:
        counter = Counter()
        env.registry.add("t", counter)
        register_raw(env, job("p", "rate(5 minutes)").to_item())
        env.clock.set(T0 + 5 * MINUTE - 5_000)
        dying = Trigger(DiesAfterClaim(env), env.queue, env.telemetry, env.clock, env.cfg, False)  # type: ignore[arg-type]
        with pytest.raises(ClaimerDies):
            dying.tick("t")
        run_id = run_id_for("p", T0 + 5 * MINUTE)
        put_item(env, {**job("p", "rate(5 minutes)").to_item(), "enabled": False})
        assert stream(env, "p") is Registration.PAUSED
        state = env.state("p")
        assert state["latest_run_id"] == run_id and state["last_scheduled_at"] == T0 + 5 * MINUTE
        env.clock.set(env.run(run_id)["lease_expires_at"] + env.cfg.clock_skew_allowance_ms + 1)
        assert env.detector().run("d").leases_recovered == 1
        assert [o.value for o in env.drain(env.worker())] == ["succeeded"]
        assert counter.calls == [run_id]


class ChangeBeforeTheRun:
    """The store, with a person's manual run and then a change of the job landing just before the
    tick's claim transaction: the registrar applies the change at once (a fast stream), after
    the tick read the job."""

    def __init__(self, env: Env, job_id: str, change: dict[str, Any], manual_run: bool = True) -> None:
        self._env = env
        self._job_id = job_id
        self._change = change
        self._manual_run = manual_run
        self.changed = False
        self.manual_run_id: str | None = None

    def write(self, ops: Sequence[WriteOp]) -> None:
        if not self.changed and ops[0].label == "create run":
            self.changed = True
            if self._manual_run:
                self.manual_run_id = self._env.ops().trigger(self._job_id, "person")
            put_item(self._env, {**job(self._job_id, "rate(1 hour)", target="t").to_item(), **self._change})
            stream(self._env, self._job_id)
        self._env.store.write(ops)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env.store, name)


def test_a_change_between_a_ticks_read_and_its_claim_makes_the_claim_read_again(env: Env) -> None:
    """Issue 25, cases 1 and 2: a pause lands after the tick read the job and before its claim.
    The claim's one transaction is conditional on the state's version, which the change moved:
    nothing of the claim lands, whatever the clocks or the index page said. It reads the job
    again and finds it paused. No run exists outside the job's chain, and no record was needed
    (the occurrence had not come due)."""
    from jobsched.services.trigger import Trigger

    env.registry.add("t", lambda _ctx: None)
    register_raw(env, job("o", "rate(1 hour)", target="t").to_item())
    env.clock.set(T0 + HOUR - 5_000)
    store = ChangeBeforeTheRun(env, "o", {"enabled": False})
    result = Trigger(store, env.queue, env.telemetry, env.clock, env.cfg, False).tick("t")  # type: ignore[arg-type]
    assert result.claimed == 0 and store.manual_run_id is not None
    assert env.store.get(RUNS, run_key(run_id_for("o", T0 + HOUR))) is None
    assert env.state("o")["status"] == "paused"
    assert env.state("o")["latest_run_id"] == store.manual_run_id
    (manual,) = (parse_run_message(body) for body in env.receive_all())  # nothing else was sent
    assert manual.run_id == store.manual_run_id


def test_a_resume_before_the_withdrawn_occurrence_runs_it_once(env: Env) -> None:
    """Paused inside a tick's claim, then resumed before the occurrence came due: the claim of
    the resumed job runs it, once."""
    from jobsched.services.trigger import Trigger

    counter = Counter()
    env.registry.add("t", counter)
    register_raw(env, job("r", "rate(1 hour)", target="t").to_item())
    env.clock.set(T0 + HOUR - 8_000)
    store = ChangeBeforeTheRun(env, "r", {"enabled": False}, manual_run=False)
    Trigger(store, env.queue, env.telemetry, env.clock, env.cfg, False).tick("t")  # type: ignore[arg-type]
    run_id = run_id_for("r", T0 + HOUR)
    assert store.changed and env.store.get(RUNS, run_key(run_id)) is None and env.receive_all() == []
    put_item(env, job("r", "rate(1 hour)", target="t").to_item())
    assert stream(env, "r") is Registration.SCHEDULED
    assert env.state("r")["next_run_at"] == T0 + HOUR
    env.trigger().tick("t2")
    assert env.run(run_id)["status"] == "pending"
    env.clock.set(T0 + HOUR)
    assert [o.value for o in env.drain(env.worker())] == ["succeeded"]
    assert counter.calls == [run_id]


class ClaimDuringTheSettle:
    """The store, with a tick's claim of the job's due occurrence making its run just before the
    registrar's settling transaction lands: after the settle read the job, before it wrote."""

    def __init__(self, env: Env, claim: list[WriteOp]) -> None:
        self._env = env
        self._claim: list[WriteOp] | None = claim

    def write(self, ops: Sequence[WriteOp]) -> None:
        if self._claim is not None and ops[0].label == "settle occurrences":
            claim, self._claim = self._claim, None
            self._env.store.write(claim)
        self._env.store.write(ops)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env.store, name)


def test_a_claim_made_while_a_change_settles_its_occurrence_makes_the_change_read_again(env: Env) -> None:
    """A re-time settles the old timing's due occurrence (a late run, within grace) while a tick
    claims that same occurrence: the claim lands between the settle's read and its write. The
    settle's transaction is conditional on the state's version, so it fails whole; the
    registrar reads again and finds the occurrence claimed, its run in the chain. No second
    record, no run outside the chain."""
    register_raw(env, job("s", "rate(1 hour)", target="t").to_item())
    env.clock.set(T0 + HOUR + 10_000)  # T0 + 1 h is due, within its grace: the trigger's, or a change's
    state = env.state("s")
    run_id = run_id_for("s", T0 + HOUR)
    claimed = new_run_item(
        "s",
        run_id,
        T0 + HOUR,
        {},
        str(state["def_hash"]),
        RunKind.SCHEDULED,
        env.clock.now_ms(),
        env.cfg,
        claimed_by="tick",
        after_run_id=state.get("latest_run_id"),
    )
    put_item(env, job("s", "rate(2 hours)", target="t").to_item())
    claim = claim_ops(state, claimed, T0 + 2 * HOUR, env.clock.now_ms())
    registrar = Registrar(ClaimDuringTheSettle(env, claim), env.telemetry, env.clock, env.cfg, env.queue)  # type: ignore[arg-type]
    assert registrar.apply("s") is Registration.SCHEDULED
    assert env.run(run_id)["claimed_by"] == "tick"  # the claim's run stands for the occurrence
    assert [r["run_id"] for r in env.runs_of("s")] == [run_id]
    assert env.state("s").get("latest_run_id") == run_id and env.state("s")["last_scheduled_at"] == T0 + HOUR
    assert env.state("s")["next_run_at"] > T0 + HOUR  # the new timing, after the claimed one
    assert env.receive_all() == []  # the claimer sends its own run, not the registrar


# --- 6. enabled stored as a string or a number -------------------------------------------------


@pytest.mark.parametrize("stored", ["false", 0, "0", False])
def test_enabled_stored_any_way_registers_once_and_stops(env: Env, stored: object) -> None:
    put_item(env, {**job("q").to_item(), "enabled": stored})
    assert stream(env, "q") is Registration.PAUSED
    # The registrar's own report comes back through the stream: it changes nothing (no loop).
    for _ in range(3):
        assert stream(env, "q") is Registration.UNCHANGED
    assert env.job_item("q")["status"] == "paused"  # type: ignore[index]


# --- 7. backfill -----------------------------------------------------------------------------


def test_backfill_reruns_missed_occurrences_once_and_rejects_the_future(env: Env) -> None:
    counter = Counter()
    env.registry.add("t", counter)
    misfire = Misfire(policy=MisfirePolicy.SKIP, grace_seconds=30)
    register_raw(env, job("m", "rate(1 minute)", misfire=misfire, overlap=OverlapPolicy.ALLOW).to_item())
    env.clock.set(T0 + 5 * MINUTE + 40_000)
    env.detector().run("d")
    missed = sorted(t for t, r in runs(env, "m").items() if r["status"] == "missed")
    assert missed == [T0 + m * MINUTE for m in range(1, 6)]
    ops = env.ops()
    from jobsched.core.clock import ms_to_dt

    result = ops.backfill("m", ms_to_dt(T0), ms_to_dt(T0 + 3 * MINUTE))
    assert sorted(result.rerun) == [run_id_for("m", T0 + m * MINUTE) for m in (1, 2, 3)]
    assert result.created == [] and result.already_existed == []
    again = ops.backfill("m", ms_to_dt(T0), ms_to_dt(T0 + 3 * MINUTE))
    assert again.rerun == [] and len(again.already_existed) == 3  # at most once
    outcomes = env.drain(env.worker())
    assert [o.value for o in outcomes] == ["succeeded"] * 3
    assert sorted(counter.calls) == sorted(result.rerun)  # the three re-runs, once each
    assert runs(env, "m")[T0 + MINUTE]["missed_reason"] == "misfire policy skip"
    with pytest.raises(ValueError, match="past occurrences only"):
        ops.backfill("m", ms_to_dt(T0), ms_to_dt(T0 + HOUR))


# --- 8. an unknown target -----------------------------------------------------------------------


def test_an_unknown_target_is_invalid_and_names_the_known_ones(env: Env) -> None:
    registrar = Registrar(
        env.store, env.telemetry, env.clock, env.cfg, known_targets={"log", "billing.invoice"}
    )
    put_item(env, job("u", target="bliling.invoice").to_item())
    assert registrar.apply("u") is Registration.INVALID
    (reason,) = env.job_item("u")["invalid_reasons"]  # type: ignore[index]
    assert "bliling.invoice" in reason and "billing.invoice, log" in reason
    put_item(env, job("u", target="billing.invoice").to_item())
    assert registrar.apply("u") is Registration.SCHEDULED


def test_a_run_whose_target_is_unknown_fails_without_retries(env: Env) -> None:
    register_raw(env, job("x", target="nowhere", retry={"max_attempts": 5}).to_item())
    env.clock.set(T0 + MINUTE)
    env.trigger().tick("t")
    assert [o.value for o in env.drain(env.worker())] == ["failed"]
    failed = env.run(run_id_for("x", T0 + MINUTE))
    assert failed["attempt"] == 1 and "no handler named 'nowhere'" in failed["last_error"]


# --- 1. the items of issue 12 that used to crash the registrar, the trigger and the detector ----


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("end", "9999-12-31T23:59:59-05:00", "end"),
        ("payload", "[" * 5000 + "]" * 5000, "payload"),
        ("payload", '{"n": ' + "9" * 5000 + "}", "payload"),
    ],
)
def test_an_item_that_used_to_crash_is_marked_invalid_and_others_run(
    env: Env, field: str, value: str, says: str
) -> None:
    register_raw(env, job("good").to_item())
    register_raw(env, job("bad").to_item())
    env.clock.set(T0 + 10 * MINUTE)  # both are behind: the detector meets them too
    put_item(env, {**job("bad").to_item(), field: value})
    assert env.trigger().tick("t").job_errors == 0  # repaired inline: out of the index
    assert env.detector().run("d").job_errors == 0
    assert stream(env, "bad") is Registration.INVALID
    (reason,) = env.job_item("bad")["invalid_reasons"]  # type: ignore[index]
    assert reason.startswith(says)
    assert env.state("good")["next_run_at"] > T0 + 10 * MINUTE  # the other job went on
    assert all(r.get("reason") for r in env.runs_of("bad"))  # what came due is recorded
