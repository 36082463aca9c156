"""Issue 25's named races, and the conditions they rest on removed one at a time (mutants).

Each scenario below is a deterministic script on the in-memory store with a manual clock. Each
holds on the product, and ``test_each_mutant_breaks_its_scenario`` shows that it fails with the
condition it depends on removed: a scenario that still passed under its mutant would guard
nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from harness import MINUTE, T0, build, job, seed_active
from jobsched.core.job import OverlapPolicy
from jobsched.core.run import run_id_for, run_key
from jobsched.core.transitions import MAX_REDISPATCHES
from jobsched.core.writes import RUNS, Update
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Outcome, Started
from jobsched_tools.sim.mutants import mutant

DEADLINE = 900_000


def run_failed_from_pending_passes_the_walk_on() -> None:
    """Case 3: a run whose messages were lost until its redispatches ran out is failed without
    ever starting. It never walked the chain, so it cannot free the job's turn: the next run
    walks past it to the run before it, which is still heartbeating, and is skipped."""
    with build("memory") as env:
        env.registry.add("t", lambda _ctx: None)
        seed_active(env, job("w", "rate(1 minute)", target="t", overlap=OverlapPolicy.SKIP), T0)
        env.clock.set(T0 - 60_000)
        env.trigger().tick("t0")  # claims T0 only (lookahead 90 s)
        (first,) = (parse_run_message(m.body) for m in env.queue.sent)
        env.clock.set(T0)
        worker = env.worker()
        holder = worker.begin(first, T0 + DEADLINE)
        assert isinstance(holder, Started)  # a long run: it heartbeats, and holds the turn
        env.trigger().tick("t1")  # claims T0 + 1 min (its messages are lost)
        lost_id = run_id_for("w", T0 + MINUTE)
        lost = env.run(lost_id)
        env.store.update(  # its redispatches are used up (each lost the same way)
            Update(RUNS, run_key(lost_id), (), "redispatched", set={"recoveries": MAX_REDISPATCHES})
        )
        env.clock.set(int(lost["lease_expires_at"]) + env.cfg.clock_skew_allowance_ms + 1)
        assert worker.heartbeat(holder)
        assert env.detector().run("d").runs_failed == 1
        assert env.run(lost_id)["status"] == "failed" and "first_started_at" not in env.run(lost_id)
        env.trigger().tick("t2")  # claims T0 + 2 min, linked behind the failed run
        following = next(
            parse_run_message(m.body)
            for m in env.queue.sent
            if m.body["run_id"] == run_id_for("w", T0 + 2 * MINUTE)
        )
        env.clock.set(T0 + 2 * MINUTE)
        assert worker.heartbeat(holder)
        assert worker.process(following, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
        assert env.run(following.run_id)["blocked_by"] == first.run_id


def stale_heartbeat_is_fenced() -> None:
    """A worker stalls past its lease; the detector recovers the run and another worker starts
    it. The stalled worker wakes and heartbeats: the token and the owner it holds are stale, so
    the heartbeat fails and it stops. Were it to land, it would cut the live holder's lease to
    the stalled worker's deadline, and the detector would fail a live run."""
    with build("memory") as env:
        env.registry.add("t", lambda _ctx: None)
        seed_active(env, job("h", "rate(1 hour)", target="t"), T0)
        env.clock.set(T0)
        env.trigger().tick("t")
        (message,) = (parse_run_message(body) for body in env.receive_all())
        stalled = env.worker("stalled").begin(message, T0 + 60_000)
        assert isinstance(stalled, Started)
        env.clock.set(int(env.run(message.run_id)["lease_expires_at"]) + env.cfg.clock_skew_allowance_ms + 1)
        assert env.detector().run("d").leases_recovered == 1
        (again,) = (parse_run_message(body) for body in env.receive_all())
        live = env.worker("live").begin(again, env.clock.now_ms() + DEADLINE)
        assert isinstance(live, Started)
        lease = env.run(message.run_id)["lease_expires_at"]
        assert env.worker("stalled").heartbeat(stalled) is False
        assert env.run(message.run_id)["lease_expires_at"] == lease
        assert stalled.context.cancelled.is_set()


def catch_up_settled_while_a_manual_run_joins() -> None:
    from test_detector import test_a_catch_up_settled_while_a_manual_run_joins_links_behind_it

    test_a_catch_up_settled_while_a_manual_run_joins_links_behind_it()


def manual_run_overtakes_an_occurrence_not_yet_due() -> None:
    from test_overlap_chain import test_a_claimed_occurrence_not_yet_due_never_blocks_a_manual_run

    with build("memory") as env:
        test_a_claimed_occurrence_not_yet_due_never_blocks_a_manual_run(env)


SCENARIOS: dict[str, Callable[[], None]] = {
    "overtake": manual_run_overtakes_an_occurrence_not_yet_due,
    "walk": run_failed_from_pending_passes_the_walk_on,
    "heartbeat": stale_heartbeat_is_fenced,
    "settle": catch_up_settled_while_a_manual_run_joins,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_scenario_holds(name: str) -> None:
    SCENARIOS[name]()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_mutant_breaks_its_scenario(name: str) -> None:
    with mutant(name), pytest.raises(AssertionError):
        SCENARIOS[name]()
