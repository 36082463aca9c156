"""The trigger tick on both stores: claims each due occurrence once, under repetition, races,
crashes between claim and send, partial send failures, invalid items and its own limits."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from harness import (
    MINUTE,
    T0,
    ClaimerDies,
    Counter,
    DiesAfterClaim,
    Env,
    build,
    job,
    scan_all,
    seed_active,
    tick_in_process,
)
from jobsched.core.errors import QueueError
from jobsched.core.job import OverlapPolicy
from jobsched.core.run import run_id_for, run_key
from jobsched.core.state import Registration
from jobsched.core.writes import JOBS, RUNS, STATE, Put
from jobsched.ports import OutgoingMessage, SendResult, WorkQueue
from jobsched.services.messages import parse_run_message
from jobsched.services.trigger import Trigger
from jobsched_tools.emulator.local_moto import LocalMoto
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry


def test_claims_a_due_occurrence_once(env: Env) -> None:
    env.ops().register(job("j1"))
    first = env.trigger().tick("t1")
    again = env.trigger().tick("t2")
    assert (first.claimed, first.dispatched, again.claimed) == (1, 1, 0)
    run = env.run(run_id_for("j1", T0 + MINUTE))
    assert run["status"] == "pending" and run["kind"] == "scheduled" and run["version"] == 1
    assert env.job("j1")["next_run_at"] == T0 + 2 * MINUTE
    # The occurrence is a minute ahead: SQS holds the message until it is due.
    assert [m.delay_seconds for m in env.queue.sent] == [60]
    env.clock.advance(MINUTE)
    assert [body["run_id"] for body in env.receive_all()] == [run["run_id"]]


def test_rate_job_claims_every_occurrence_in_the_lookahead(env: Env) -> None:
    env.ops().register(job("fast", "rate(10 seconds)"))
    result = env.trigger().tick("t")
    assert result.claimed == 9  # T0+10 s .. T0+90 s
    assert sorted(m.delay_seconds for m in env.queue.sent) == list(range(10, 100, 10))
    assert env.job("fast")["next_run_at"] == T0 + 100_000
    assert env.trigger().tick("again").claimed == 0


def test_sqs_holds_delayed_messages() -> None:
    """The one check that SQS itself (moto) honours the delay the trigger asks for."""
    with build("dynamodb") as env:
        env.queue.inner.send([OutgoingMessage("a", {"x": 1}, 30), OutgoingMessage("b", {"x": 2}, 0)])
        bodies = [body for _, body in env.receive(10)]
        assert bodies == [{"x": 2}]


def test_invalid_item_is_marked_and_others_still_claimed(env: Env) -> None:
    """A person breaks a registered job (the stream has not delivered it yet): the trigger repairs
    the job's state inline, out of the index, and every other job is claimed as usual."""
    seed_active(env, job("good"), T0)
    seed_active(env, job("bad"), T0)
    bad = {**job("bad").to_item(), "schedule": "cron(61 * * * ? *)"}
    env.store.write([Put(JOBS, bad, condition=(), label="person breaks the job")])
    result = env.trigger().tick("t")
    assert result.deferred == 1 and result.claimed >= 1
    state = env.state("bad")
    assert state["status"] == "invalid" and "next_run_at" not in state
    assert env.run(run_id_for("good", T0))["status"] == "pending"
    assert env.trigger().tick("t2").deferred == 0  # out of the index now
    # The registrar function, when the record arrives, writes the reasons a person reads.
    assert env.registrar().apply("bad") is Registration.INVALID
    reasons = env.job_item("bad")["invalid_reasons"]  # type: ignore[index]
    assert any("schedule" in reason and "61" in reason for reason in reasons)


class TickingStore:
    """Each claim takes a second of (manual) time: lets a deadline fall mid-tick."""

    def __init__(self, env: Env) -> None:
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env.store, name)

    def write(self, ops: Sequence[Any]) -> None:
        self._env.store.write(ops)
        if any(op.label == "advance job" for op in ops):  # a claim's last write
            self._env.clock.advance(1000)


def test_deadline_stops_early_and_leaves_the_rest_due(env: Env) -> None:
    for index in range(6):
        seed_active(env, job(f"j{index}"), T0 + MINUTE)
    trigger = Trigger(TickingStore(env), env.queue, env.telemetry, env.clock, env.cfg, parallel_queries=False)  # type: ignore[arg-type]
    deadline = env.clock.now_ms() + env.cfg.deadline_margin_ms + 2500
    result = trigger.tick("t", deadline_ms=deadline)
    assert result.stopped_early and result.claimed == 3 and result.backlog == 3
    assert result.dispatched == 3  # what it claimed is still sent
    assert env.trigger().tick("t2").claimed == 3
    assert len(scan_all(env.store, RUNS)) == 6


class BrokenQueue:
    def send(self, _messages: Sequence[OutgoingMessage]) -> SendResult:
        raise QueueError("the trigger died before sending")


def test_trigger_killed_between_claim_and_send_loses_nothing(env: Env) -> None:
    counter = Counter()
    env.registry.add("t", counter)
    env.ops().register(job("j1", overlap="allow"))
    inner, env.queue.inner = env.queue.inner, BrokenQueue()
    result = env.trigger().tick("dies")
    env.queue.inner = inner
    assert result.claimed == 1 and result.dispatch_failed == 1
    run_id = run_id_for("j1", T0 + MINUTE)
    pending = env.run(run_id)
    assert pending["status"] == "pending" and env.receive_all() == []
    # Nothing happens before the dispatch lease (plus the skew allowance) lapses ...
    env.clock.set(pending["lease_expires_at"] + env.cfg.clock_skew_allowance_ms - 1)
    assert env.detector().run("d0").leases_recovered == 0
    env.clock.advance(2)
    recovered = env.detector().run("d1")
    assert recovered.leases_recovered == 1
    again = env.run(run_id)
    assert (again["status"], again["attempt"], again["version"]) == ("pending", 1, 2)
    outcomes = env.drain(env.worker())
    assert [o.value for o in outcomes] == ["succeeded"]
    assert counter.count(run_id) == 1 and env.run(run_id)["status"] == "succeeded"
    assert env.detector().run("d2").leases_recovered == 0
    assert env.trigger().tick("later").duplicates == 0


def test_trigger_crashing_after_its_claim_leaves_a_run_in_the_chain_that_the_detector_sends() -> None:
    """The claim is one transaction: a claimer that dies after it leaves the run made, the job
    moved past it and the run the chain's end, never half of that. Nothing was sent; the run's
    dispatch lease brings it to the miss detector, which sends it once."""
    with build("memory") as env:
        counter = Counter()
        env.registry.add("t", counter)
        env.ops().register(job("j1"))
        crashing = Trigger(DiesAfterClaim(env), env.queue, env.telemetry, env.clock, env.cfg, False)  # type: ignore[arg-type]
        with pytest.raises(ClaimerDies):
            crashing.tick("dies")
        run_id = run_id_for("j1", T0 + MINUTE)
        assert env.run(run_id)["status"] == "pending" and env.receive_all() == []
        state = env.state("j1")
        assert state["next_run_at"] == T0 + 2 * MINUTE and state["latest_run_id"] == run_id
        result = env.trigger().tick("next")
        assert (result.claimed, result.duplicates, result.dispatched) == (0, 0, 0)  # not its occurrence
        env.clock.set(env.run(run_id)["lease_expires_at"] + env.cfg.clock_skew_allowance_ms + 1)
        assert env.detector().run("d").leases_recovered == 1
        assert [o.value for o in env.drain(env.worker())] == ["succeeded"]
        assert counter.calls == [run_id]


def test_a_claim_that_read_a_stale_state_reads_again_and_links_behind_the_real_end() -> None:
    """A manual run joins the chain between the tick's read and its claim: the claim's
    transaction loses on the state's version (nothing of it lands), and the claim made from the
    fresh read links behind the manual run. One message, one link."""
    with build("memory") as env:
        env.registry.add("t", Counter())
        env.ops().register(job("j1", overlap=OverlapPolicy.SKIP))
        manual_ids: list[str] = []

        class ManualRunFirst:
            def __getattr__(self, name: str) -> object:
                return getattr(env.store, name)

            def write(self, ops: list[object]) -> None:
                if not manual_ids and any(getattr(op, "label", "") == "create run" for op in ops):
                    manual_ids.append(env.ops().trigger("j1", "person"))
                env.store.write(ops)  # type: ignore[arg-type]

        result = Trigger(ManualRunFirst(), env.queue, env.telemetry, env.clock, env.cfg, False).tick("t")  # type: ignore[arg-type]
        assert result.claimed == 1
        run_id = run_id_for("j1", T0 + MINUTE)
        assert env.run(run_id)["after_run_id"] == manual_ids[0] and env.run(run_id)["version"] == 1
        assert env.state("j1")["latest_run_id"] == run_id
        sent = sorted(parse_run_message(m.body).run_id for m in env.queue.sent)
        assert sent == sorted([run_id, manual_ids[0]])


class FlakyBatchQueue:
    """The first SendMessageBatch rejects entries 1 and 3; later ones accept everything."""

    def __init__(self, inner: WorkQueue) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    def send(self, messages: Sequence[OutgoingMessage]) -> SendResult:
        self.calls.append([m.id for m in messages])
        if len(self.calls) == 1:
            rejected = [messages[1], messages[3]]
            self.inner.send([m for m in messages if m not in rejected])
            return SendResult(failed=rejected)
        return self.inner.send(messages)


def test_partial_batch_failure_is_not_resent_at_once_and_the_detector_redispatches_it(env: Env) -> None:
    # botocore already retried the request (standard retry mode, with backoff); the dispatcher
    # sends each batch once and leaves the entries SQS rejected to the dispatch lease.
    for index in range(5):
        seed_active(env, job(f"j{index}"), T0 + MINUTE)
    flaky = FlakyBatchQueue(env.queue.inner)
    env.queue.inner = flaky
    result = env.trigger().tick("t")
    assert (result.claimed, result.dispatched, result.dispatch_failed) == (5, 3, 2)
    assert len(flaky.calls) == 1
    rejected = [run_id_for(f"j{i}", T0 + MINUTE) for i in (1, 3)]
    assert all(env.run(run_id)["status"] == "pending" for run_id in rejected)
    lapse = max(env.run(run_id)["lease_expires_at"] for run_id in rejected)
    env.clock.set(lapse + env.cfg.clock_skew_allowance_ms + 1)
    # No worker took the three sent runs either, so the detector recovers all five pending runs.
    assert env.detector().run("d").leases_recovered == 5
    env.clock.advance(MINUTE)
    run_ids = {body["run_id"] for body in env.receive_all()}
    assert run_ids == {run_id_for(f"j{i}", T0 + MINUTE) for i in range(5)}


def test_late_occurrence_within_grace_is_claimed_older_is_left_to_the_detector(env: Env) -> None:
    seed_active(env, job("late"), T0 - 30_000)
    seed_active(env, job("overdue"), T0 - 5 * MINUTE)
    result = env.trigger().tick("t")
    assert result.claimed >= 1
    assert env.store.get(RUNS, run_key(run_id_for("late", T0 - 30_000))) is not None
    assert env.store.get(RUNS, run_key(run_id_for("overdue", T0 - 5 * MINUTE))) is None
    assert env.job("overdue")["next_run_at"] == T0 - 5 * MINUTE


def test_definition_changed_but_not_registered_is_registered_inline_and_claimed(env: Env) -> None:
    """A tick that finds a job item newer than its state registers it (the stream has not yet)
    and claims from the state that leaves, in the same tick: a first occurrence must not wait
    a tick period for the next one (issue 16)."""
    seed_active(env, job("j1"), T0, def_hash="stale")
    result = env.trigger().tick("t")
    assert result.deferred == 0 and result.claimed >= 1
    assert env.run(run_id_for("j1", T0))["def_hash"] == job("j1").definition_hash()
    assert env.state("j1")["def_hash"] == job("j1").definition_hash()


def test_a_job_deleted_but_not_registered_is_deferred(env: Env) -> None:
    seed_active(env, job("j1"), T0, def_hash="stale")
    env.store.delete(JOBS, {"job_id": "j1"})
    result = env.trigger().tick("t")
    assert (result.claimed, result.deferred) == (0, 1)


# --- races -------------------------------------------------------------------------------------

# Each job has 16 due occurrences (T0-60 s .. T0+90 s every 10 s): 208 in memory, 112 on the moto
# server, whose transactions deep-copy both tables (cost grows with the runs table).
RACE_JOBS = {"memory": 13, "server": 7}


def seed_race(env: Env) -> None:
    for index in range(RACE_JOBS[env.kind]):
        seed_active(env, job(f"r{index:02d}", "rate(10 seconds)"), T0 - MINUTE)


def racing_ticks(env: Env, racers: int) -> list[list[str]]:
    telemetries = [MemoryTelemetry() for _ in range(racers)]
    barrier = threading.Barrier(racers)
    errors: list[BaseException] = []

    def race(telemetry: MemoryTelemetry) -> None:
        trigger = Trigger(env.store, env.queue, telemetry, env.clock, env.cfg, parallel_queries=False)
        barrier.wait()
        try:
            trigger.tick("race")
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(t,)) for t in telemetries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    return [[e.correlation_id for e in t.named("run.claimed")] for t in telemetries]


def assert_each_claimed_once(env: Env, claims: list[str]) -> None:
    assert len(claims) == len(set(claims)), "an occurrence was claimed twice"
    runs = scan_all(env.store, RUNS)
    assert len(runs) == RACE_JOBS[env.kind] * 16
    assert {r["run_id"] for r in runs} == set(claims)
    assert all(r["version"] == 1 for r in runs)


@pytest.mark.parametrize("kind", ["memory", "server"])
def test_racing_triggers_claim_each_occurrence_exactly_once(kind: str, moto_server: LocalMoto) -> None:
    with build(kind, moto=moto_server) as env:
        seed_race(env)
        per_racer = racing_ticks(env, racers=3)
        # A racer gives up a job it keeps losing; a later tick finishes what both left.
        leftover_claims: list[str] = []
        for _ in range(3):
            telemetry = MemoryTelemetry()
            Trigger(env.store, env.queue, telemetry, env.clock, env.cfg, False).tick("sweep")
            leftover_claims += [e.correlation_id for e in telemetry.named("run.claimed")]
        assert_each_claimed_once(env, [c for racer in per_racer for c in racer] + leftover_claims)
        # The racers did race: at least two of them won claims (threads on the server interleave
        # per request; in memory the GIL may let one racer run through first).
        winners = sum(1 for racer in per_racer if racer)
        assert winners >= (2 if kind == "server" else 1), [len(r) for r in per_racer]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_racing_trigger_processes_claim_each_occurrence_exactly_once(moto_server: LocalMoto) -> None:
    with build("server", moto=moto_server) as env:
        seed_race(env)
        tables = [env.store.table_name(t) for t in (JOBS, STATE, RUNS)]  # type: ignore[attr-defined]
        context = multiprocessing.get_context("spawn")
        with context.Pool(3) as pool:
            results = pool.starmap(
                tick_in_process,
                [(moto_server.endpoint_url, *tables, T0, f"p{i}") for i in range(3)],
            )
        telemetry = MemoryTelemetry()
        for _ in range(3):
            Trigger(env.store, env.queue, telemetry, env.clock, env.cfg, False).tick("sweep")
        sweep = [e.correlation_id for e in telemetry.named("run.claimed")]
        assert sum(len(r) for r in results) > 0
        assert_each_claimed_once(env, [c for r in results for c in r] + sweep)
