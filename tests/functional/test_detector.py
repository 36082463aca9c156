"""The miss detector: expired leases recovered once (also with two detectors racing), long outages
under each misfire policy, overload bounded per invocation, degradation, and invocations cut
anywhere leaving consistent state."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from harness import MINUTE, T0, Env, build, default_cfg, job, seed_active
from jobsched.core.job import Misfire, MisfirePolicy, OverlapPolicy
from jobsched.core.run import RunKind, run_id_for
from jobsched.core.transitions import new_run_item
from jobsched.core.writes import RUNS, Put
from jobsched.services.detector import MissDetector
from jobsched_tools.emulator.local_moto import LocalMoto

HOUR = 60 * MINUTE


def seed_dead_runs(env: Env, count: int) -> list[str]:
    """Runs whose workers died: running, lease expired at T0."""
    dead = job("dead", "rate(1 minute)", overlap=OverlapPolicy.ALLOW)
    env.ops().register(dead)  # a recovery sends the run with the definition it was claimed under
    definition = dead.to_item()
    ids = []
    for index in range(count):
        run = new_run_item(
            "dead",
            run_id_for("dead", T0 - index * MINUTE),
            T0,
            definition,
            dead.definition_hash(),
            RunKind.SCHEDULED,
            T0,
            env.cfg,
        )
        run.update(status="running", version=2, owner=f"w/{index}", lease_expires_at=T0, check_at=T0)
        env.store.write([Put(RUNS, run, condition=(), label="seed run")])
        ids.append(run["run_id"])
    env.clock.set(T0 + env.cfg.clock_skew_allowance_ms + 1)
    return ids


def all_runs(env: Env, job_id: str) -> list[dict[str, Any]]:
    return sorted(env.runs_of(job_id), key=lambda r: r["scheduled_at"])


@pytest.mark.parametrize("kind", ["memory", "server"])
def test_two_detectors_racing_recover_each_lease_once(kind: str, moto_server: LocalMoto) -> None:
    with build(kind, moto=moto_server) as env:
        ids = seed_dead_runs(env, 30)
        results = []
        barrier = threading.Barrier(2)

        def detect(name: str) -> None:
            detector = env.detector()
            barrier.wait()
            results.append(detector.run(name))

        threads = [threading.Thread(target=detect, args=(f"d{i}",)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sum(r.leases_recovered for r in results) == 30
        for run_id in ids:
            run = env.run(run_id)
            assert (run["status"], run["version"], run["attempt"], run["recoveries"]) == ("pending", 3, 2, 1)
        sent = Counter(m.body["run_id"] for m in env.queue.sent)
        assert set(sent) == set(ids) and set(sent.values()) == {1}  # each redispatched once


def test_lease_backlog_larger_than_the_budget_takes_several_invocations(env: Env) -> None:
    env.cfg = default_cfg(detector_max_items=12)
    ids = seed_dead_runs(env, 30)
    results = [env.detector().run(f"d{i}") for i in range(4)]
    assert [r.leases_recovered for r in results] == [12, 12, 6, 0]
    assert results[0].stopped_early and results[0].backlog == 18
    assert all(env.run(run_id)["recoveries"] == 1 for run_id in ids)


def outage(env: Env, policy: MisfirePolicy, minutes: int, max_catchup: int = 10) -> int:
    """A per-minute job whose trigger was down ``minutes``; returns how many occurrences are the
    detector's (older than the one-minute grace): T0 .. T0+(minutes-2) min."""
    misfire = Misfire(policy=policy, max_catchup=max_catchup)
    seed_active(env, job("minutely", "rate(1 minute)", misfire=misfire, overlap=OverlapPolicy.ALLOW), T0)
    env.clock.set(T0 + minutes * MINUTE)
    return minutes - 1


def overdue_runs(env: Env, overdue: int) -> list[dict[str, Any]]:
    return [r for r in all_runs(env, "minutely") if r["scheduled_at"] < T0 + overdue * MINUTE]


def check_outage_end(env: Env) -> None:
    """After the outage the job is back at a future occurrence with the trigger, and every
    occurrence before it has exactly one run."""
    env.trigger().tick("after")
    state = env.job("minutely")
    assert state["status"] == "active" and state["next_run_at"] > env.clock.now_ms()
    runs = all_runs(env, "minutely")
    expected = list(range(T0, state["next_run_at"], MINUTE))
    assert [r["scheduled_at"] for r in runs] == expected
    assert state["last_scheduled_at"] == expected[-1]  # whether caught up, missed or claimed
    late = [r for r in runs if r["kind"] == "scheduled"]
    assert all(r["status"] == "pending" for r in late)  # within grace or ahead: ordinary runs
    assert env.trigger().tick("again").claimed == 0
    assert env.detector().run("again").items == 0


# Six hours down (memory) or twenty minutes (moto, whose transactions are slow with many items).
OUTAGES = [("memory", 6 * 60), ("dynamodb", 20)]


@pytest.fixture(params=OUTAGES, ids=[kind for kind, _ in OUTAGES])
def down(request: pytest.FixtureRequest) -> Iterator[tuple[Env, int]]:
    kind, minutes = request.param
    with build(kind) as built:
        yield built, minutes


def test_long_outage_run_once(down: tuple[Env, int]) -> None:
    env, minutes = down
    overdue = outage(env, MisfirePolicy.RUN_ONCE, minutes)
    result = env.detector().run("d")
    assert result.missed_recorded == overdue - 1  # 359 missed records for six hours
    runs = overdue_runs(env, overdue)
    assert [r["status"] for r in runs] == ["missed"] * (overdue - 1) + ["pending"]  # the latest runs
    assert all("coalesced" in r["reason"] for r in runs)
    assert runs[-1]["kind"] == "catchup"
    check_outage_end(env)


def test_long_outage_run_all_capped(down: tuple[Env, int]) -> None:
    env, minutes = down
    overdue = outage(env, MisfirePolicy.RUN_ALL, minutes, max_catchup=10)
    result = env.detector().run("d")
    assert result.missed_recorded == overdue - 10
    runs = overdue_runs(env, overdue)
    assert [r["status"] for r in runs] == ["pending"] * 10 + ["missed"] * (overdue - 10)  # the oldest run
    assert "max_catchup 10" in runs[-1]["reason"]
    catchups = {m.body["run_id"] for m in env.queue.sent if m.body["run_id"] in {r["run_id"] for r in runs}}
    assert len(catchups) == 10
    check_outage_end(env)
    env.clock.advance(MINUTE)
    assert env.trigger().tick("next").claimed == 1
    assert "catchups" not in env.job("minutely")  # the trigger's claim ends the outage's count


def test_long_outage_skip(down: tuple[Env, int]) -> None:
    env, minutes = down
    overdue = outage(env, MisfirePolicy.SKIP, minutes)
    result = env.detector().run("d")
    assert result.missed_recorded == overdue
    assert {r["status"] for r in overdue_runs(env, overdue)} == {"missed"}
    overdue_ids = {r["run_id"] for r in overdue_runs(env, overdue)}
    assert not [m for m in env.queue.sent if m.body["run_id"] in overdue_ids]
    check_outage_end(env)


@pytest.mark.parametrize("policy", list(MisfirePolicy))
def test_overdue_backlog_over_several_invocations_records_each_once(policy: MisfirePolicy) -> None:
    with build("memory", default_cfg(detector_max_items=100)) as env:
        overdue = outage(env, policy, 6 * 60, max_catchup=10)
        results = [env.detector().run(f"d{i}") for i in range(6)]
        assert results[0].stopped_early and results[0].backlog >= 1
        assert sum(r.missed_recorded for r in results) == len(
            [r for r in overdue_runs(env, overdue) if r["status"] == "missed"]
        )
        runs = overdue_runs(env, overdue)
        assert len(runs) == overdue
        pending = [r for r in runs if r["status"] == "pending"]
        expected = {MisfirePolicy.RUN_ONCE: 1, MisfirePolicy.RUN_ALL: 10, MisfirePolicy.SKIP: 0}[policy]
        assert len(pending) == expected
        if policy is MisfirePolicy.RUN_ONCE:
            assert pending[0]["scheduled_at"] == T0 + (overdue - 1) * MINUTE
        check_outage_end(env)


def test_degraded_run_all_is_coalesced_and_says_why() -> None:
    with build("memory", default_cfg(detector_degrade_backlog=2)) as env:
        for index in range(3):
            misfire = Misfire(policy=MisfirePolicy.RUN_ALL, max_catchup=10)
            seed_active(env, job(f"j{index}", "rate(1 minute)", misfire=misfire), T0)
        env.clock.set(T0 + HOUR)
        result = env.detector().run("d")
        assert result.degraded and result.catchups_started >= 3
        assert env.telemetry.named("detector.degraded")
        for index in range(3):
            runs = [
                r for r in all_runs(env, f"j{index}") if r["kind"] == "catchup" or r["status"] == "missed"
            ]
            assert len(runs) == 59 and [r["status"] for r in runs].count("pending") == 1
            assert all("run_all degraded to run_once" in r["reason"] for r in runs)


class CrashingStore:
    """The detector's process dies after ``writes`` successful writes."""

    def __init__(self, env: Env, writes: int) -> None:
        self._env = env
        self._left = writes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env.store, name)

    def write(self, ops: Sequence[Any]) -> None:
        if self._left == 0:
            raise SystemExit("killed")
        self._left -= 1
        self._env.store.write(ops)


@pytest.mark.parametrize("writes", [0, 1, 2, 3, 5])
def test_invocation_cut_anywhere_leaves_consistent_state(writes: int) -> None:
    with build("memory") as env:
        ids = seed_dead_runs(env, 3)
        overdue = outage(env, MisfirePolicy.RUN_ONCE, 6 * 60)
        for index in range(len(ids)):  # the dead runs' leases expired long ago too
            assert env.run(ids[index])["status"] == "running"
        store = CrashingStore(env, writes)
        crashing = MissDetector(store, env.queue, env.telemetry, env.clock, env.cfg, False)  # type: ignore[arg-type]
        with pytest.raises(SystemExit):
            crashing.run("cut")
        env.detector().run("next")
        assert env.detector().run("idle").items == 0
        runs = overdue_runs(env, overdue)
        assert len(runs) == overdue and [r["status"] for r in runs].count("pending") == 1
        assert all(env.run(run_id)["recoveries"] == 1 for run_id in ids)
        check_outage_end(env)


def test_deadline_cuts_the_invocation_and_the_next_one_continues(env: Env) -> None:
    overdue = outage(env, MisfirePolicy.RUN_ONCE, 20)
    first = env.detector().run("d1", deadline_ms=env.clock.now_ms() + env.cfg.deadline_margin_ms)
    assert first.stopped_early and first.items == 0 and first.backlog >= 1
    second = env.detector().run("d2", deadline_ms=env.clock.now_ms() + 60_000)
    assert second.missed_recorded == overdue - 1
    check_outage_end(env)


class CountingQueries:
    """The environment's store, counting the queries of each index."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.queries: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env.store, name)

    def query(self, index: Any, partition: Any, *args: Any, **kwargs: Any) -> Any:
        self.queries[index] += 1
        return self.env.store.query(index, partition, *args, **kwargs)


@pytest.mark.parametrize(("overdue", "passes"), [(0, 1), (3, 2)])
def test_the_overdue_index_is_read_a_second_time_only_when_something_is_overdue(
    overdue: int, passes: int
) -> None:
    """The count that decides degradation holds none of what it reads (a backlog may be
    millions), so handling the overdue jobs reads the index again; with nothing overdue, the
    usual sweep, it does not."""
    with build("memory") as env:
        for index in range(3):
            seed_active(env, job(f"j{index}", "rate(1 hour)", overlap="allow"), T0)
        env.clock.set(T0 + (10 * MINUTE if overdue else -MINUTE))
        store = CountingQueries(env)
        detector = MissDetector(store, env.queue, env.telemetry, env.clock, env.cfg, False)  # type: ignore[arg-type]
        assert detector.run("d").jobs_caught_up == overdue
        assert store.queries["next-run"] == passes * env.cfg.shard_count


class ManualRunBeforeTheSettle:
    """The store, with a person's manual run joining the job's chain after the detector read the
    overdue job and before its settling transaction lands."""

    def __init__(self, env: Env, job_id: str) -> None:
        self._env = env
        self._job_id = job_id
        self.manual_run_id: str | None = None

    def write(self, ops: list[Any]) -> None:
        if self.manual_run_id is None and ops[0].label == "settle occurrences":
            self.manual_run_id = self._env.ops().trigger(self._job_id, "person")
        self._env.store.write(ops)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env.store, name)


def test_a_catch_up_settled_while_a_manual_run_joins_links_behind_it() -> None:
    """Issue 25, mutation of the settle's state-as-read: the manual run moved the chain's end
    after the detector read the job, so the settle's transaction fails whole (nothing of it
    lands); the next sweep settles from a fresh read, and the catch-up links behind the manual
    run and is skipped while it runs."""
    from jobsched.services.messages import parse_run_message
    from jobsched.services.worker import Outcome, Started

    with build("memory") as env:
        env.registry.add("t", lambda _ctx: None)
        seed_active(env, job("h", "rate(1 hour)", target="t", misfire=Misfire(grace_seconds=5)), T0)
        env.clock.set(T0 + 10_000)  # overdue, never claimed (the trigger was down): the detector's
        store = ManualRunBeforeTheSettle(env, "h")
        detector = MissDetector(store, env.queue, env.telemetry, env.clock, env.cfg, False)  # type: ignore[arg-type]
        assert detector.run("d1").jobs_caught_up == 0 and store.manual_run_id is not None
        assert env.runs_of("h") == [env.run(store.manual_run_id)]  # the lost settle wrote nothing
        assert detector.run("d2").jobs_caught_up == 1
        run_id = run_id_for("h", T0)
        assert env.run(run_id)["after_run_id"] == store.manual_run_id
        messages = {m.run_id: m for m in map(parse_run_message, env.receive_all())}
        worker = env.worker()
        assert isinstance(worker.begin(messages[store.manual_run_id], T0 + 900_000), Started)
        assert worker.process(messages[run_id], T0 + 900_000) is Outcome.SKIPPED
