"""Trigger fan-out (services/fanout.py): the scheduled tick invokes the other shard groups and
claims group 0; each group claims its own shards only; together they claim every occurrence once;
two invocations on the same shards (a retry, an overlap, a deploy changing TriggerGroups) race
through the conditional claim and still claim each occurrence once."""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from harness import MINUTE, T0, Env, build, default_cfg, job, seed_active
from jobsched.core.errors import InvokeError
from jobsched.core.run import shard_of
from jobsched.core.shard_groups import group_shards
from jobsched.core.writes import RUNS
from jobsched.ports import GroupInvoker
from jobsched.services.fanout import TriggerInvocation
from jobsched.services.paging import scan_all
from jobsched.services.trigger import Trigger
from jobsched_tools.emulator.local_moto import LocalMoto
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry

SHARDS = 5
JOBS = 30
SCHEDULED: dict[str, Any] = {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}


# Racing invocations run on threads: the serialised moto server, like DynamoDB, applies each
# request atomically (in-process moto does not).
@pytest.fixture(params=["memory", "server"])
def env(request: pytest.FixtureRequest, moto_server: LocalMoto) -> Iterator[Env]:
    with build(
        request.param, cfg=default_cfg(shard_count=SHARDS, trigger_groups=3), moto=moto_server
    ) as built:
        yield built


class Invocations:
    """The Lambda service for the tests: records each group event the fan-out tick sends, and
    fails the groups in ``failing``."""

    def __init__(self, failing: frozenset[int] = frozenset()) -> None:
        self.sent: list[dict[str, Any]] = []
        self.failing = failing
        self._lock = threading.Lock()

    def invoke(self, event: dict[str, Any]) -> None:
        if event["group"] in self.failing:
            raise InvokeError(f"group {event['group']}: throttled")
        with self._lock:
            self.sent.append(event)


def invocation(env: Env, invoker: GroupInvoker | None = None) -> tuple[TriggerInvocation, MemoryTelemetry]:
    telemetry = MemoryTelemetry()
    trigger = Trigger(env.store, env.queue, telemetry, env.clock, env.cfg)

    def no_invoker() -> GroupInvoker:
        raise AssertionError("a group invocation must not invoke anything")

    factory = (lambda: invoker) if invoker is not None else no_invoker
    return TriggerInvocation(trigger, factory, telemetry, env.cfg), telemetry


def handle(
    env: Env, event: Mapping[str, Any], invoker: GroupInvoker | None = None
) -> tuple[dict[str, Any], set[str], MemoryTelemetry]:
    """One invocation; returns its summary, the job ids it claimed and its telemetry."""
    service, telemetry = invocation(env, invoker)
    summary = service.handle(event, f"inv-{event.get('group', 'tick')}", None)
    return summary, {str(e.fields["job_id"]) for e in telemetry.named("run.claimed")}, telemetry


def seed(env: Env, count: int = JOBS) -> list[str]:
    ids = [f"job{i:03d}" for i in range(count)]
    for job_id in ids:
        seed_active(env, job(job_id), T0 + MINUTE)
    assert len({shard_of(j, SHARDS) for j in ids}) == SHARDS  # every shard has work
    return ids


def runs_per_occurrence(env: Env) -> Tally[str]:
    return Tally(str(run["run_id"]) for run in scan_all(env.store, RUNS))


def test_the_tick_and_its_groups_claim_every_occurrence_once_each_group_its_own_shards(env: Env) -> None:
    ids = seed(env)
    invoker = Invocations()
    tick, claimed_by_tick, _ = handle(env, SCHEDULED, invoker)
    assert invoker.sent == [{"group": 1, "groups": 3}, {"group": 2, "groups": 3}]
    assert (tick["group"], tick["groups_invoked"], tick["groups_not_invoked"]) == (0, 2, 0)
    claimed = {0: claimed_by_tick}
    for event in invoker.sent:
        claimed[event["group"]] = handle(env, event)[1]
    for group, jobs in claimed.items():
        assert {shard_of(j, SHARDS) for j in jobs} <= set(group_shards(SHARDS, 3, group)), group
    assert sorted(j for jobs in claimed.values() for j in jobs) == ids  # all claimed, by one group each
    per_run = runs_per_occurrence(env)
    assert len(per_run) == JOBS and set(per_run.values()) == {1}


def test_a_group_leaves_the_other_groups_shards_alone(env: Env) -> None:
    ids = seed(env)
    summary, claimed, _ = handle(env, {"group": 1, "groups": 3})
    mine = [j for j in ids if shard_of(j, SHARDS) % 3 == 1]
    assert sorted(claimed) == mine and summary["claimed"] == len(mine) and summary["shards"] == 2
    for other in set(ids) - set(mine):
        assert env.state(other)["next_run_at"] == T0 + MINUTE  # not advanced


def test_a_lost_group_invocation_waits_for_the_next_tick(env: Env) -> None:
    ids = seed(env)
    summary, first, telemetry = handle(env, SCHEDULED, Invocations(failing=frozenset({1, 2})))
    assert (summary["groups_invoked"], summary["groups_not_invoked"]) == (0, 2)
    assert {shard_of(j, SHARDS) % 3 for j in first} == {0}  # group 0 claimed its own regardless
    assert sorted(e.fields["group"] for e in telemetry.named("fanout.failed")) == [1, 2]
    assert telemetry.metric_sum("GroupInvokeFailures") == 2
    # The next tick's invocations do arrive: the rest is claimed then, nothing twice.
    invoker = Invocations()
    handle(env, SCHEDULED, invoker)
    later = set().union(*(handle(env, event)[1] for event in invoker.sent))
    assert sorted(first | later) == ids
    assert set(runs_per_occurrence(env).values()) == {1}


@pytest.mark.parametrize(
    "events",
    [
        # the same group twice (an overlap of two ticks' invocations, a retried invocation)
        [{"group": 1, "groups": 3}, {"group": 1, "groups": 3}],
        # overlapping groups (a deploy changing TriggerGroups from 2 to 3 mid-tick): shards 0, 2, 4
        # against shards 0, 3, and a whole-table tick against both
        [{"group": 0, "groups": 2}, {"group": 0, "groups": 3}, {"group": 0, "groups": 1}],
    ],
)
def test_invocations_on_the_same_shards_claim_nothing_twice(env: Env, events: list[dict[str, Any]]) -> None:
    ids = seed(env)
    start = threading.Barrier(len(events))
    results: list[dict[str, Any]] = [{} for _ in events]

    def run(index: int) -> None:
        start.wait()
        results[index] = handle(env, events[index])[0]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(events))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    per_run = runs_per_occurrence(env)
    covered = {s for e in events for s in group_shards(SHARDS, e["groups"], e["group"])}
    expected = sum(1 for j in ids if shard_of(j, SHARDS) in covered)
    assert len(per_run) == expected and set(per_run.values()) == {1}
    assert sum(summary["claimed"] for summary in results) == expected  # each claim counted once
