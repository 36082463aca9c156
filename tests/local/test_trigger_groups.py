"""Trigger fan-out on the local stack: K trigger processes, each invoked with its own shard
group's event (as a fan-out tick's invocations are), over disjoint groups of shards, claim every
occurrence exactly once, each in the process that owns its shard (docs/design.md, "Trigger
fan-out"). On both deployed claim shapes: a legacy stack's groups page ``next-run`` (a job's
state sits in its job id's shard), a successor stack's (template.yaml's default) page ``due`` (a
head sits in its own run id's shard, ``lease_shard``)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
from jobsched.core.claim_shape import DeployedShape
from jobsched.core.head_change import HeadChangePlan, plan_head_change
from jobsched.core.job import JobDefinition
from jobsched.core.run import run_id_for
from jobsched.core.state import registered_state
from jobsched.core.transitions.head_change import head_change_ops
from jobsched.core.writes import JOBS, RUNS, STATE, Put
from jobsched.ports import Store
from jobsched.services.paging import scan_all
from jobsched_tools.local.stack import LocalStack, StackOptions

GROUPS = 3
SHARDS = 4  # the local stack's SHARD_COUNT: group 0 owns shards 0 and 3, groups 1 and 2 one each
JOBS_N = 40

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _seed(stack: LocalStack, due_ms: int) -> dict[str, int]:
    """Active jobs due at ``due_ms`` (one occurrence each inside the lookahead), as the
    registrar leaves them on the stack's shape: legacy, a state in ``next-run``; successor, a
    state and its first head in ``due``. Returns each occurrence's run id and the shard a tick
    pages to find it, as stored."""
    store = stack.store()
    cfg = stack.config()
    assert cfg.shard_count == SHARDS and cfg.trigger_groups == GROUPS
    now = time.time_ns() // 1_000_000
    shards: dict[str, int] = {}
    for i in range(JOBS_N):
        # rate(1 hour) from ``due``: its first occurrence is ``due``, its next an hour later.
        start = datetime.fromtimestamp(due_ms / 1000, UTC)
        definition = JobDefinition(job_id=f"g{i:03d}", schedule="rate(1 hour)", target="log", start=start)
        item = {**definition.to_item(), "status": "active", "def_hash": definition.definition_hash()}
        store.write([Put(JOBS, item, condition=(), label="seed job")])
        if stack.claim_shape is DeployedShape.LEGACY:
            state = registered_state(definition, due_ms, cfg.shard_count, due_ms)
            store.write([Put(STATE, state, condition=(), label="seed state")])
            shards[run_id_for(definition.job_id, due_ms)] = int(state["sched_shard"])
            continue
        digest = definition.definition_hash()
        plan = plan_head_change(definition.job_id, None, None, definition, digest, now, cfg)
        assert isinstance(plan, HeadChangePlan), plan
        store.write(head_change_ops(plan, now, cfg))
        head = plan.new_head
        assert head is not None and int(head["scheduled_at"]) == due_ms, head
        shards[str(head["run_id"])] = int(head["lease_shard"])
    assert set(shards.values()) == set(range(SHARDS))  # every shard, so every group, has work
    return shards


def _claim_records(store: Store, shape: DeployedShape) -> dict[str, str]:
    """Each claimed occurrence's run id and the claimer its claim's item names: legacy, the run
    item the claim created; successor, the item the claim put at the head's successor key (it
    names the head it claimed in ``after_run_id``)."""
    items = list(scan_all(store, RUNS))
    if shape is DeployedShape.LEGACY:
        return {str(item["run_id"]): str(item["claimed_by"]) for item in items}
    return {str(item["after_run_id"]): str(item["claimed_by"]) for item in items if "claimed_by" in item}


@pytest.mark.parametrize("shape", [DeployedShape.SUCCESSOR, DeployedShape.LEGACY], ids=str)
def test_k_trigger_processes_over_disjoint_groups_claim_every_occurrence_once(shape: DeployedShape) -> None:
    claims: list[tuple[str, str]] = []  # (process, run id) of every run.claimed line
    lock = threading.Lock()

    def sink(proc: str, event: dict[str, Any]) -> None:
        if event.get("event") == "run.claimed":
            with lock:
                claims.append((proc, str(event.get("correlation_id"))))

    # Its own tables: a stack earlier in this process leaves its items in moto's in-process backend.
    options = StackOptions(
        workers=0,
        trigger_groups=GROUPS,
        tick_seconds=1.0,
        registrar=False,
        prefix=f"jobsched-groups-{shape.value}",
        settings={"CLAIM_SHAPE": shape.value},
    )
    with LocalStack(options, sink=sink) as stack:
        assert stack.claim_shape is shape
        due = (time.time_ns() // 1_000_000 // 1000 + 4) * 1000  # whole second, a few seconds ahead
        shard_of_run = _seed(stack, due)
        store = stack.store()
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and len(_claim_records(store, shape)) < JOBS_N:
            time.sleep(0.5)
        time.sleep(2.5)  # two more ticks of every group: nothing is claimed again
        claimed_by = _claim_records(store, shape)

    assert sorted(claimed_by) == sorted(shard_of_run)  # every occurrence claimed
    per_run = Counter(run_id for _, run_id in claims)
    assert set(per_run) == set(shard_of_run) and set(per_run.values()) == {1}, per_run  # once each
    for proc, run_id in claims:  # by the process whose group owns the occurrence's shard
        assert proc == f"trigger-g{shard_of_run[run_id] % GROUPS}", (proc, run_id)
    for run_id, claimer in claimed_by.items():  # the claim's own item names the same claimer
        invocation = claimer.split("/")[1]
        assert invocation.startswith(f"trigger-g{shard_of_run[run_id] % GROUPS}-"), (run_id, claimer)
