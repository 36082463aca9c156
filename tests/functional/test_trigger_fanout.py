"""Trigger fan-out (services/fanout.py): the scheduled tick invokes the other shard groups and
claims group 0; each group claims its own shards only; together they claim every occurrence once;
two invocations on the same shards (a retry, an overlap, a deploy changing TriggerGroups) race
through the conditional claim and still claim each occurrence once. On both deployed claim shapes:
a legacy stack's groups page their shards of ``next-run`` (a job's state is in its job id's
shard), a successor stack's their shards of ``due`` (a head is in its own run id's shard,
``lease_shard``), so there each occurrence is one group's whatever shard its job's other
occurrences are in."""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from harness import MINUTE, T0, Env, build, default_cfg, job, seed_active
from jobsched.core.claim_shape import DeployedShape
from jobsched.core.errors import InvokeError
from jobsched.core.head_change import HeadChangePlan, plan_head_change
from jobsched.core.job import JobDefinition
from jobsched.core.occurrences import find_head
from jobsched.core.run import parse_run_id, run_id_for, run_key
from jobsched.core.shard_groups import group_shards
from jobsched.core.transitions.head_change import head_change_ops
from jobsched.core.writes import JOBS as JOBS_TABLE
from jobsched.core.writes import RUNS, STATE, Item, Put
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
@pytest.fixture(
    params=[(kind, shape) for shape in ("legacy", "successor") for kind in ("memory", "server")],
    ids=lambda param: "-".join(param),
)
def env(request: pytest.FixtureRequest, moto_server: LocalMoto) -> Iterator[Env]:
    kind, shape = request.param
    cfg = default_cfg(shard_count=SHARDS, trigger_groups=3)
    with build(kind, cfg=cfg, moto=moto_server, shape=shape) as built:
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
    trigger = Trigger(env.store, env.queue, telemetry, env.clock, env.cfg, deployed=env.shape)

    def no_invoker() -> GroupInvoker:
        raise AssertionError("a group invocation must not invoke anything")

    factory = (lambda: invoker) if invoker is not None else no_invoker
    return TriggerInvocation(trigger, factory, telemetry, env.cfg), telemetry


def handle(
    env: Env, event: Mapping[str, Any], invoker: GroupInvoker | None = None
) -> tuple[dict[str, Any], set[str], MemoryTelemetry]:
    """One invocation; returns its summary, the run ids it claimed and its telemetry."""
    service, telemetry = invocation(env, invoker)
    summary = service.handle(event, f"inv-{event.get('group', 'tick')}", None)
    return summary, {e.correlation_id for e in telemetry.named("run.claimed")}, telemetry


def register_head(env: Env, definition: JobDefinition) -> None:
    """The job's first registration on a successor stack (the successor registrar's transaction:
    its state and its first head), written directly: fast seeding for many jobs."""
    now = env.clock.now_ms()
    item = {**definition.to_item(), "status": "active", "def_hash": definition.definition_hash()}
    env.store.write([Put(JOBS_TABLE, item, condition=(), label="seed job")])
    digest = definition.definition_hash()
    plan = plan_head_change(definition.job_id, None, None, definition, digest, now, env.cfg)
    assert isinstance(plan, HeadChangePlan), plan
    env.store.write(head_change_ops(plan, now, env.cfg))


def seed(env: Env, count: int = JOBS) -> dict[str, int]:
    """``count`` jobs due at T0 + 1 minute; returns each occurrence's run id and the shard a tick
    pages to find it: legacy, its job's state's ``next-run`` shard; successor, its head's ``due``
    shard (as stored: the test reads where the item is, not where it ought to be)."""
    shards: dict[str, int] = {}
    for i in range(count):
        definition = job(f"job{i:03d}")
        if env.shape is DeployedShape.LEGACY:
            state = seed_active(env, definition, T0 + MINUTE)
            shards[run_id_for(definition.job_id, T0 + MINUTE)] = int(state["sched_shard"])
            continue
        register_head(env, definition)
        head = find_head(env.ops().runs(definition.job_id, limit=10)).head
        assert head is not None and int(head["scheduled_at"]) == T0 + MINUTE, head
        shards[str(head["run_id"])] = int(head["lease_shard"])
    assert set(shards.values()) == set(range(SHARDS))  # every shard has work, so every group
    return shards


def claims_per_occurrence(env: Env) -> Tally[str]:
    """How many times each occurrence's run was sent (a claim sends its run once), checked against
    what the claims wrote: legacy, the run items; successor, the items a claim put (each names the
    head it claimed in ``after_run_id``)."""
    sent = Tally(str(message.body["run_id"]) for message in env.queue.sent)
    items = list(scan_all(env.store, RUNS))
    if env.shape is DeployedShape.LEGACY:
        written = {str(item["run_id"]) for item in items}
    else:
        written = {str(item["after_run_id"]) for item in items if "claimed_by" in item}
    assert set(sent) == written
    return sent


def unclaimed(env: Env, run_id: str) -> bool:
    """Legacy: the job's state still names the occurrence; successor: its head has no successor."""
    if env.shape is DeployedShape.LEGACY:
        state: Item | None = env.store.get(STATE, {"job_id": parse_run_id(run_id).job_id})
        return state is not None and int(state["next_run_at"]) == T0 + MINUTE
    head = env.store.get(RUNS, run_key(run_id))
    assert head is not None
    return env.store.get(RUNS, run_key(str(head["next_key"]))) is None


def test_the_tick_and_its_groups_claim_every_occurrence_once_each_group_its_own_shards(env: Env) -> None:
    shard_of_run = seed(env)
    invoker = Invocations()
    tick, claimed_by_tick, _ = handle(env, SCHEDULED, invoker)
    assert invoker.sent == [{"group": 1, "groups": 3}, {"group": 2, "groups": 3}]
    assert (tick["group"], tick["groups_invoked"], tick["groups_not_invoked"]) == (0, 2, 0)
    claimed = {0: claimed_by_tick}
    for event in invoker.sent:
        claimed[event["group"]] = handle(env, event)[1]
    for group, runs in claimed.items():
        assert {shard_of_run[r] for r in runs} <= set(group_shards(SHARDS, 3, group)), group
    # all claimed, by one group each
    assert sorted(r for runs in claimed.values() for r in runs) == sorted(shard_of_run)
    per_run = claims_per_occurrence(env)
    assert sorted(per_run) == sorted(shard_of_run) and set(per_run.values()) == {1}


def test_a_group_leaves_the_other_groups_shards_alone(env: Env) -> None:
    shard_of_run = seed(env)
    summary, claimed, _ = handle(env, {"group": 1, "groups": 3})
    mine = [r for r, shard in shard_of_run.items() if shard % 3 == 1]
    assert sorted(claimed) == sorted(mine) and summary["claimed"] == len(mine) and summary["shards"] == 2
    for other in set(shard_of_run) - set(mine):
        assert unclaimed(env, other), other


def test_a_lost_group_invocation_waits_for_the_next_tick(env: Env) -> None:
    shard_of_run = seed(env)
    summary, first, telemetry = handle(env, SCHEDULED, Invocations(failing=frozenset({1, 2})))
    assert (summary["groups_invoked"], summary["groups_not_invoked"]) == (0, 2)
    assert {shard_of_run[r] % 3 for r in first} == {0}  # group 0 claimed its own regardless
    assert sorted(e.fields["group"] for e in telemetry.named("fanout.failed")) == [1, 2]
    assert telemetry.metric_sum("GroupInvokeFailures") == 2
    # The next tick's invocations do arrive: the rest is claimed then, nothing twice.
    invoker = Invocations()
    handle(env, SCHEDULED, invoker)
    later = set().union(*(handle(env, event)[1] for event in invoker.sent))
    assert sorted(first | later) == sorted(shard_of_run)
    assert set(claims_per_occurrence(env).values()) == {1}


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
    shard_of_run = seed(env)
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
    per_run = claims_per_occurrence(env)
    covered = {s for e in events for s in group_shards(SHARDS, e["groups"], e["group"])}
    expected = sorted(r for r, shard in shard_of_run.items() if shard in covered)
    assert sorted(per_run) == expected and set(per_run.values()) == {1}
    assert sum(summary["claimed"] for summary in results) == len(expected)  # each claim counted once
