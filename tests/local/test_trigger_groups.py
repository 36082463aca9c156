"""Trigger fan-out on the local stack: K trigger processes, each invoked with its own shard
group's event (as a fan-out tick's invocations are), over disjoint groups of shards, claim every
occurrence exactly once, each in the process that owns its shard (docs/design.md, "Trigger
fan-out")."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from jobsched.core.job import JobDefinition
from jobsched.core.run import run_id_for, shard_of
from jobsched.core.state import registered_state
from jobsched.core.writes import JOBS, RUNS, STATE, Put
from jobsched.services.paging import scan_all
from jobsched_tools.local.stack import LocalStack, StackOptions

GROUPS = 3
SHARDS = 4  # the local stack's SHARD_COUNT: group 0 owns shards 0 and 3, groups 1 and 2 one each
JOBS_N = 40

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _seed(stack: LocalStack, due_ms: int) -> dict[str, int]:
    """Active jobs due at ``due_ms`` (one occurrence each inside the lookahead), as the
    registrar leaves them. Returns each run id's shard."""
    store = stack.store()
    cfg = stack.config()
    assert cfg.shard_count == SHARDS and cfg.trigger_groups == GROUPS
    shards: dict[str, int] = {}
    for i in range(JOBS_N):
        definition = JobDefinition(job_id=f"g{i:03d}", schedule="rate(1 hour)", target="log")
        item = {**definition.to_item(), "status": "active", "def_hash": definition.definition_hash()}
        store.write([Put(JOBS, item, condition=(), label="seed job")])
        state = registered_state(definition, due_ms, cfg.shard_count, due_ms)
        store.write([Put(STATE, state, condition=(), label="seed state")])
        shards[run_id_for(definition.job_id, due_ms)] = shard_of(definition.job_id, cfg.shard_count)
    assert set(shards.values()) == set(range(SHARDS))  # every shard, so every group, has work
    return shards


def test_k_trigger_processes_over_disjoint_groups_claim_every_occurrence_once() -> None:
    claims: list[tuple[str, str]] = []  # (process, run id) of every run.claimed line
    lock = threading.Lock()

    def sink(proc: str, event: dict[str, Any]) -> None:
        if event.get("event") == "run.claimed":
            with lock:
                claims.append((proc, str(event.get("correlation_id"))))

    # Its own tables: a stack earlier in this process leaves its items in moto's in-process backend.
    options = StackOptions(
        workers=0, trigger_groups=GROUPS, tick_seconds=1.0, registrar=False, prefix="jobsched-groups"
    )
    with LocalStack(options, sink=sink) as stack:
        due = (time.time_ns() // 1_000_000 // 1000 + 4) * 1000  # whole second, a few seconds ahead
        shard_of_run = _seed(stack, due)
        store = stack.store()
        deadline = time.monotonic() + 45
        runs: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            runs = list(scan_all(store, RUNS))
            if len(runs) >= JOBS_N:
                break
            time.sleep(0.5)
        time.sleep(2.5)  # two more ticks of every group: nothing is claimed again
        runs = list(scan_all(store, RUNS))

    assert sorted(str(r["run_id"]) for r in runs) == sorted(shard_of_run)  # every occurrence claimed
    per_run = Counter(run_id for _, run_id in claims)
    assert set(per_run) == set(shard_of_run) and set(per_run.values()) == {1}, per_run  # once each
    for proc, run_id in claims:  # by the process whose group owns the job's shard
        assert proc == f"trigger-g{shard_of_run[run_id] % GROUPS}", (proc, run_id)
    for run in runs:  # the run's own record names the same claimer
        invocation = str(run["claimed_by"]).split("/")[1]
        assert invocation.startswith(f"trigger-g{shard_of_run[str(run['run_id'])] % GROUPS}-"), run
