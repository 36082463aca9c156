"""Issue 29 part 5: ``buffer_all`` (every run waits its turn, in chain order) and
``cancel_other`` (a new run asks the running one to stop, then waits for it: never overlap)."""

from __future__ import annotations

from typing import Any

import pytest
from harness import T0, Env, build, job, seed_active
from jobsched.core.invariants import SKIPPED_BUFFER_ALL, check
from jobsched.core.job import OverlapPolicy
from jobsched.core.run import RunMessage, run_key
from jobsched.core.writes import RUNS, STATE
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import HandlerResult, Outcome, Started

DEADLINE = 900_000


@pytest.fixture
def env() -> Any:
    with build("memory") as env:
        env.registry.add("t", lambda _ctx: None)
        yield env


def _runs(env: Env, overlap: OverlapPolicy, count: int) -> list[RunMessage]:
    """``count`` manual runs of one job, in chain order, as their messages."""
    seed_active(env, job("j", "rate(1 day)", overlap=overlap), T0 + 86_400_000)
    ids = [env.ops().trigger("j", f"r{i}") for i in range(count)]
    by_id = {m.body["run_id"]: parse_run_message(m.body) for m in env.queue.sent}
    return [by_id[i] for i in ids]


def _begin(env: Env, message: RunMessage) -> Started | Outcome:
    return env.worker().begin(message, env.clock.now_ms() + DEADLINE)


def _promoted(env: Env) -> list[str]:
    return [e.correlation_id for e in env.telemetry.named("run.promoted")]


def test_buffer_all_runs_every_run_in_chain_order_one_at_a_time(env: Env) -> None:
    a, b, c = _runs(env, OverlapPolicy.BUFFER_ALL, 3)
    started_a = _begin(env, a)
    assert isinstance(started_a, Started)
    assert _begin(env, c) is Outcome.BUFFERED  # out of order: c waits behind b, not yet started
    assert _begin(env, b) is Outcome.BUFFERED  # b waits behind a
    assert env.run(c.run_id)["blocked_by"] == b.run_id and env.run(b.run_id)["blocked_by"] == a.run_id
    worker = env.worker()
    assert worker.finish(started_a, HandlerResult(True)) is Outcome.SUCCEEDED
    assert _promoted(env) == [b.run_id]
    b2 = parse_run_message(env.queue.sent[-1].body)
    started_b = _begin(env, b2)
    assert isinstance(started_b, Started)
    assert worker.finish(started_b, HandlerResult(True)) is Outcome.SUCCEEDED
    c2 = parse_run_message(env.queue.sent[-1].body)
    assert c2.run_id == c.run_id
    started_c = _begin(env, c2)
    assert isinstance(started_c, Started)
    assert worker.finish(started_c, HandlerResult(True)) is Outcome.SUCCEEDED
    assert [env.run(m.run_id)["status"] for m in (a, b, c)] == ["succeeded"] * 3
    states = env.store.scan(STATE).items
    assert check(states, env.store.scan(RUNS).items) == []


def test_buffer_all_a_run_not_yet_due_holds_the_turn_strict_chain_order(env: Env) -> None:
    """Under buffer_all no run overtakes: a manual run behind a claimed occurrence not yet due
    waits for it (skip and buffer_one let the manual run go first)."""
    seed_active(env, job("j", "rate(1 hour)", overlap=OverlapPolicy.BUFFER_ALL), T0)
    env.clock.set(T0 - 60_000)
    env.trigger().tick("tick")
    manual = env.ops().trigger("j", "now")
    message = next(parse_run_message(m.body) for m in env.queue.sent if m.body["run_id"] == manual)
    assert _begin(env, message) is Outcome.BUFFERED
    assert env.run(manual)["blocked_by"] == "j@2026-12-01T00:00:00Z"


def test_buffer_all_waits_unnamed_when_its_holder_names_another(env: Env) -> None:
    """The rare case: the holder names another waiting run (one whose own predecessor ended
    without starting). The run still waits, never skipped, and the detector re-decides it."""
    a, b, c = _runs(env, OverlapPolicy.BUFFER_ALL, 3)
    assert isinstance(_begin(env, a), Started)
    env.store.update(_set(b.run_id, status="failed", finished_at=T0))  # b ended without starting
    env.store.update(_set(a.run_id, buffered_next="j@manual:elsewhere"))
    assert _begin(env, c) is Outcome.BUFFERED
    run = env.run(c.run_id)
    assert run["status"] == "buffered" and run["blocked_by"] == a.run_id
    assert env.run(a.run_id)["buffered_next"] == "j@manual:elsewhere"
    assert check(env.store.scan(STATE).items, env.store.scan(RUNS).items, only=[SKIPPED_BUFFER_ALL]) == []


def test_cancel_other_asks_the_holder_to_stop_then_runs_after_it(env: Env) -> None:
    a, b = _runs(env, OverlapPolicy.CANCEL_OTHER, 2)
    worker = env.worker()
    started_a = worker.begin(a, env.clock.now_ms() + DEADLINE)
    assert isinstance(started_a, Started)
    assert _begin(env, b) is Outcome.BUFFERED  # waits: never beside the running one
    assert env.run(a.run_id)["cancel_requested"] == b.run_id
    assert not started_a.context.cancelled.is_set()
    assert worker.heartbeat(started_a) is True  # the lease is still a's
    assert started_a.context.cancelled.is_set()  # the handler is told
    # The handler honours ctx.cancelled and stops; the run ends failed, not retried.
    outcome = worker.finish(started_a, HandlerResult(False, "stopped"))
    assert outcome is Outcome.FAILED
    ended = env.run(a.run_id)
    assert ended["status"] == "failed" and ended["attempt"] == 1
    assert "cancel_other" in ended["last_error"]
    assert _promoted(env) == [b.run_id]
    started_b = _begin(env, parse_run_message(env.queue.sent[-1].body))
    assert isinstance(started_b, Started)


def test_cancel_other_a_handler_that_finishes_anyway_succeeds(env: Env) -> None:
    a, b = _runs(env, OverlapPolicy.CANCEL_OTHER, 2)
    worker = env.worker()
    started_a = worker.begin(a, env.clock.now_ms() + DEADLINE)
    assert isinstance(started_a, Started)
    assert _begin(env, b) is Outcome.BUFFERED
    worker.heartbeat(started_a)
    assert worker.finish(started_a, HandlerResult(True)) is Outcome.SUCCEEDED


def test_cancel_other_one_waits_at_most_a_third_is_skipped(env: Env) -> None:
    a, b, c = _runs(env, OverlapPolicy.CANCEL_OTHER, 3)
    assert isinstance(_begin(env, a), Started)
    assert _begin(env, b) is Outcome.BUFFERED
    assert _begin(env, c) is Outcome.SKIPPED


def test_cancel_other_the_mark_is_conditional_on_the_holders_token(env: Env) -> None:
    """A holder that moved on since the walk read it (recovered, retried) is not marked: the wait
    is decided again from the run as it is now."""
    a, b = _runs(env, OverlapPolicy.CANCEL_OTHER, 2)
    assert isinstance(_begin(env, a), Started)
    from jobsched.core.transitions import buffer_at_start_ops

    holder = env.run(a.run_id)
    stale = {**holder, "version": holder["version"] - 1}
    ops = buffer_at_start_ops(b.run_id, b.version, stale, T0, env.cfg, cancel=True)
    from jobsched.core.errors import ConditionFailed

    with pytest.raises(ConditionFailed):
        env.store.write(ops)
    assert "cancel_requested" not in env.run(a.run_id)
    assert env.run(b.run_id)["status"] == "pending"


def _set(run_id: str, **values: Any) -> Any:
    from jobsched.core.writes import Update

    return Update(RUNS, run_key(run_id), (), "test", set=values)


def test_a_run_after_an_overtaker_waits_for_the_run_it_overtook(env: Env) -> None:
    """Found by chaos seed 5 (30 jobs, 2 h) after issue 29 changed the seeded job mix, and
    reproduced on main: chain S0 <- M <- S1. The manual run M starts before S0 is due (passing over
    it, overtake), S0 waits for M and runs after it; S1 then walks from M, finds M finished and
    takes the turn while S0 still runs. A finished run that overtook others does not vouch for
    them: marked ``overtook`` by its start, it passes the walk on to its predecessor (as a run
    failed without a start does)."""
    seed_active(env, job("j", "rate(1 minute)", overlap=OverlapPolicy.BUFFER_ONE), T0)
    env.clock.set(T0 - 80_000)
    env.trigger().tick("t1")  # claims S0 only
    (s0,) = [parse_run_message(m.body) for m in env.queue.sent]
    env.clock.set(T0 - 20_000)
    env.ops().trigger("j", "m")
    manual = parse_run_message(env.queue.sent[-1].body)
    worker = env.worker()
    started_m = worker.begin(manual, env.clock.now_ms() + DEADLINE)
    assert isinstance(started_m, Started)
    env.clock.set(T0 + 1_000)
    assert worker.begin(s0, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    env.clock.set(T0 + 10_000)
    env.trigger().tick("t2")  # claims S1, linked behind M
    (s1,) = [parse_run_message(m.body) for m in env.queue.sent if m.body.get("after_run_id") == manual.run_id]
    assert worker.finish(started_m, HandlerResult(True)) is Outcome.SUCCEEDED
    assert isinstance(_begin(env, parse_run_message(env.queue.sent[-1].body)), Started)  # S0 runs
    env.clock.set(s1.scheduled_at)
    assert not isinstance(_begin(env, s1), Started), "S1 started while S0 runs"


def test_a_run_after_an_overtaker_whose_overtaken_run_was_skipped_for_it_runs(env: Env) -> None:
    """The walk's other half: S0 came due while the manual run M that overtook it ran, and was
    skipped for M (``blocked_by`` M). Once M has ended, S1 (linked behind M) walks M -> S0 -> M:
    S0 was skipped for the overtaker the walk came from, so the walk goes on before S0 and finds
    the turn free. Without that, the walk would go round M and S0 until it ran out, and S1, and
    every later run, would be skipped."""
    seed_active(env, job("k", "rate(1 minute)", overlap=OverlapPolicy.SKIP), T0)
    env.clock.set(T0 - 80_000)
    env.trigger().tick("t1")  # claims S0 only
    (s0,) = [parse_run_message(m.body) for m in env.queue.sent]
    env.clock.set(T0 - 20_000)
    env.ops().trigger("k", "m")
    manual = parse_run_message(env.queue.sent[-1].body)
    worker = env.worker()
    started_m = worker.begin(manual, env.clock.now_ms() + DEADLINE)
    assert isinstance(started_m, Started)
    env.clock.set(T0 + 1_000)
    assert worker.begin(s0, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED  # M still runs
    env.clock.set(T0 + 10_000)
    env.trigger().tick("t2")  # claims S1, linked behind M
    (s1,) = [parse_run_message(m.body) for m in env.queue.sent if m.body.get("after_run_id") == manual.run_id]
    assert worker.finish(started_m, HandlerResult(True)) is Outcome.SUCCEEDED
    env.clock.set(s1.scheduled_at)
    assert isinstance(_begin(env, s1), Started)
