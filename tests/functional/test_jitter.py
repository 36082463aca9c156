"""Issue 29 part 1: a per-job start window (``jitter_seconds``). An occurrence is due, claimed,
overdue and missed by its instant; its run starts at the instant plus an offset derived from its
run id, so every sender agrees on it and exactly-once is untouched."""

from __future__ import annotations

from typing import Any

import pytest
from harness import T0, Env, build, job, seed_active
from jobsched.core.job import MAX_JITTER_SECONDS, InvalidJob, JobDefinition
from jobsched.core.run import RunKind, manual_run_id, run_id_for
from jobsched.core.timing import start_at_ms, start_offset_ms
from jobsched.core.transitions import new_run_item
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Outcome, Started

DEADLINE = 900_000


@pytest.fixture
def env() -> Any:
    with build("memory") as env:
        yield env


def test_the_offset_is_a_function_of_the_run_id_within_the_window() -> None:
    offsets = {start_offset_ms(run_id_for("j", T0 + i * 60_000), 30) for i in range(200)}
    assert all(0 <= o <= 30_000 for o in offsets)
    assert len(offsets) > 150  # spread over the window, not one value
    rid = run_id_for("j", T0)
    assert start_offset_ms(rid, 30) == start_offset_ms(rid, 30)  # every actor derives the same
    assert start_offset_ms(rid, 0) == 0
    assert start_offset_ms(manual_run_id("j", "r1"), 30) == 0  # "run now" means now
    assert start_at_ms(rid, T0, {"jitter_seconds": 30}) == T0 + start_offset_ms(rid, 30)
    assert start_at_ms(rid, T0, None) == T0


def test_the_window_is_validated_at_the_boundary() -> None:
    item = job("j").to_item()
    assert "jitter_seconds" not in item  # unset: the item form (and the digest) as before
    assert JobDefinition.from_item({**item, "jitter_seconds": MAX_JITTER_SECONDS}).jitter_seconds == 600
    for bad in (-1, MAX_JITTER_SECONDS + 1, "soon"):
        with pytest.raises(InvalidJob, match="jitter_seconds"):
            JobDefinition.from_item({**item, "jitter_seconds": bad})


def test_the_claim_delays_the_message_to_the_jittered_start_and_the_lease_covers_it(env: Env) -> None:
    env.registry.add("t", lambda _ctx: None)
    definition = job("j", "rate(1 hour)", jitter_seconds=300)
    seed_active(env, definition, T0)
    env.clock.set(T0 - 60_000)
    env.trigger().tick("tick")
    rid = run_id_for("j", T0)
    offset = start_offset_ms(rid, 300)
    (sent,) = env.queue.sent
    assert sent.delay_seconds == (60_000 + offset + 500) // 1000
    run = env.run(rid)
    assert run["scheduled_at"] == T0  # the occurrence is its instant: its id, its record
    assert run["lease_expires_at"] == T0 + offset + env.cfg.dispatch_lease_seconds * 1000
    # The claim lag (ScheduleLag) is against the instant; the start lag against the start.
    (claimed,) = env.telemetry.named("run.claimed")
    assert claimed.fields["lag_ms"] == -60_000


def test_the_worker_waits_for_the_jittered_start_and_measures_lag_against_it(env: Env) -> None:
    env.registry.add("t", lambda _ctx: None)
    definition = job("j", "rate(1 hour)", jitter_seconds=120)
    seed_active(env, definition, T0)
    env.clock.set(T0 - 10_000)
    env.trigger().tick("tick")
    rid = run_id_for("j", T0)
    start = T0 + start_offset_ms(rid, 120)
    body = env.queue.sent[0].body
    worker = env.worker()
    env.clock.set(start - 4_000)  # delivered early, within the worker's wait
    waited: list[int] = []
    worker._sleep_ms = lambda ms: (waited.append(ms), env.clock.advance(ms))  # type: ignore[method-assign]
    started = worker.begin(parse_run_message(body), env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    assert waited == [4_000]
    (event,) = env.telemetry.named("run.started")
    assert event.fields["lag_ms"] == 0
    assert worker.finish(started, worker.execute(started)) is Outcome.SUCCEEDED


def test_a_message_far_ahead_of_its_jittered_start_is_deferred_not_started(env: Env) -> None:
    env.registry.add("t", lambda _ctx: None)
    seed_active(env, job("j", "rate(1 hour)", jitter_seconds=600), T0)
    rid = run_id_for("j", T0)
    offset = start_offset_ms(rid, 600)
    assert offset > 10_000  # this run's offset (a digest of its id) is well into the window
    env.clock.set(T0 - 10_000)
    env.trigger().tick("tick")
    body = env.queue.sent[0].body
    env.clock.set(T0)  # at the instant, long before the start: the message came too early
    assert env.worker().process(parse_run_message(body), T0 + DEADLINE) is Outcome.DEFERRED
    assert env.run(rid)["status"] == "pending"


def test_due_is_the_instant_a_settled_late_run_keeps_its_offset(env: Env) -> None:
    """Ownership is by instant: 90 s after the instant (grace 60 s) the occurrence is the
    detector's whatever the window; a catch-up run is sent to its own jittered start."""
    env.registry.add("t", lambda _ctx: None)
    definition = job("j", "rate(1 hour)", jitter_seconds=300)
    seed_active(env, definition, T0)
    env.clock.set(T0 + 90_000)
    assert env.trigger().tick("tick").claimed == 0  # overdue by instant: not the trigger's
    env.detector().run("sweep")
    rid = run_id_for("j", T0)
    run = env.run(rid)
    assert run["kind"] == RunKind.CATCHUP.value
    start = T0 + start_offset_ms(rid, 300)
    (sent,) = env.queue.sent
    assert sent.delay_seconds == max(0, (start - env.clock.now_ms() + 500) // 1000)


def test_a_run_item_without_jitter_keeps_its_lease(env: Env) -> None:
    run = new_run_item(
        "j", run_id_for("j", T0), T0, job("j").to_item(), "h", RunKind.SCHEDULED, T0 - 5_000, env.cfg
    )
    assert run["lease_expires_at"] == T0 + env.cfg.dispatch_lease_seconds * 1000
