"""A job's first occurrence is on time even when it comes due before the next tick (issue 16):
the registrar claims what a tick would claim, right after it (re)schedules the job, through the
same conditional writes, so a racing tick never claims it a second time."""

from __future__ import annotations

import pytest
from harness import KINDS, T0, Env, build, job
from jobsched.core.run import run_id_for
from jobsched.core.writes import JOBS, Put
from jobsched.services.registrar import Registrar

SECOND = 1000


def write_job(env: Env, **fields: object) -> None:
    definition = job("first", "cron(*/5 * * * ? *)", **fields)  # every 5 minutes, T0 is one
    env.store.write([Put(JOBS, definition.to_item(), condition=(), label="person writes")])


def sent_runs(env: Env) -> list[str]:
    return [m.body["run_id"] for m in env.queue.sent]


def test_a_first_occurrence_due_before_the_next_tick_is_sent_at_registration(env: Env) -> None:
    env.clock.set(T0 - 20 * SECOND)  # 20 s before it is due; the next tick may be 60 s away
    write_job(env)
    env.claiming_registrar().apply("first")
    assert sent_runs(env) == [run_id_for("first", T0)]
    assert env.run(run_id_for("first", T0))["claimed_at"] == T0 - 20 * SECOND
    assert [e.correlation_id for e in env.telemetry.named("claim.early")] == ["first"]


def test_a_tick_racing_the_registrar_claims_nothing_twice(env: Env) -> None:
    env.clock.set(T0 - 20 * SECOND)
    write_job(env)
    env.claiming_registrar().apply("first")
    tick = env.trigger().tick("t")
    env.claiming_registrar().apply("first")  # a duplicate stream record: nothing changed, no claim
    assert tick.claimed == 0
    assert sent_runs(env) == [run_id_for("first", T0)]


def test_a_first_occurrence_beyond_the_lookahead_is_left_to_the_ticks(env: Env) -> None:
    env.clock.set(T0 - 4 * 60 * SECOND)  # due in 4 minutes: a tick reaches it in time
    write_job(env)
    env.claiming_registrar().apply("first")
    assert sent_runs(env) == []
    assert env.state("first")["next_run_at"] == T0


def test_a_resumed_job_is_claimed_at_registration_too(env: Env) -> None:
    env.clock.set(T0 - 4 * 60 * SECOND)
    write_job(env, enabled=False)
    registrar = env.claiming_registrar()
    registrar.apply("first")
    env.clock.set(T0 - 10 * SECOND)
    write_job(env)  # resumed 10 s before an occurrence
    registrar.apply("first")
    assert sent_runs(env) == [run_id_for("first", T0)]


def test_an_early_claim_that_fails_leaves_the_registration_and_the_occurrence_to_the_tick(env: Env) -> None:
    def broken(job_id: str) -> None:
        raise RuntimeError(f"{job_id}: throttled for good")

    env.clock.set(T0 - 20 * SECOND)
    write_job(env)
    registrar = Registrar(env.store, env.telemetry, env.clock, env.cfg, env.queue, claim_now=broken)
    registrar.apply("first")  # does not raise: the stream record is not retried for it
    assert env.state("first")["next_run_at"] == T0
    assert [e.correlation_id for e in env.telemetry.named("claim.early_failed")] == ["first"]
    assert env.trigger().tick("t").claimed >= 1 and run_id_for("first", T0) in sent_runs(env)


@pytest.mark.parametrize("kind", KINDS)
def test_a_successor_jobs_first_occurrence_is_claimed_at_registration_too(kind: str) -> None:
    """On a stack with the successor claim (issue 37), the registration's new head is claimed at
    once as today's first occurrences are: its run is sent before any tick, and the claim put
    its successor (the next head) with ``claimed_at`` the registration's time."""
    with build(kind, successor=True) as env:
        env.clock.set(T0 - 20 * SECOND)
        write_job(env)
        env.claiming_registrar().apply("first")
        first = run_id_for("first", T0, 1)
        assert sent_runs(env) == [first]
        successor = env.run(run_id_for("first", T0 + 5 * 60 * SECOND, 1))
        assert successor["claimed_at"] == T0 - 20 * SECOND and successor["after_run_id"] == first
        assert env.trigger().tick("t").claimed == 0  # a tick after it claims nothing twice
        assert sent_runs(env) == [first]
