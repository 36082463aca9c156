"""Changing ShardCount orphans no job and no run (issue 26 item 3). Lowered from 16 to 8, the
jobs on shards 8-15 of the next-run index were never queried again and a run whose lease sat on
one of them was never recovered. The miss detector remembers the highest ShardCount whose shards
may hold index entries (its bookkeeping's ``shard_high``), sweeps those shards too, and moves
every job indexed there onto a queried shard (a registration: conditional on the version);
once they stay empty for an hour it stops."""

from __future__ import annotations

from harness import MINUTE, T0, Env, default_cfg, job, register_raw
from jobsched.core.run import RunKind, shard_of
from jobsched.core.transitions import BOOKKEEPING_KEY
from jobsched.core.writes import STATE
from jobsched.services.reconciler import DRAIN_HOLD_MS

HOUR = 60 * MINUTE
JOBS = [f"job-{i:02d}" for i in range(24)]


def test_lowering_the_shard_count_leaves_no_job_unclaimed_and_no_lease_unrecovered(env: Env) -> None:
    env.cfg = default_cfg(shard_count=16)
    for job_id in JOBS:
        register_raw(env, job(job_id, "rate(1 hour)").to_item())
    env.detector().run("d16")  # a detector has run under 16 shards: it remembers them
    assert sum(env.state(j)["sched_shard"] >= 8 for j in JOBS) >= 8  # many jobs on shards 8-15
    env.clock.set(T0 + HOUR - 5_000)
    claimed = env.trigger().tick("t16")
    assert claimed.claimed == len(JOBS)
    runs = [env.runs_of(j)[0] for j in JOBS]
    stranded = [r["run_id"] for r in runs if r["lease_shard"] >= 8]
    assert stranded  # dispatch leases on shards that are about to be dropped

    # ShardCount lowered to 8; no worker ever started the claimed runs.
    env.cfg = default_cfg(shard_count=8)
    env.clock.set(T0 + HOUR + 40_000)  # every dispatch lease has lapsed
    result = env.detector().run("d8")
    assert result.leases_recovered == len(JOBS)  # also those on shards 8-15
    assert all(env.run(run_id)["version"] == 2 and env.run(run_id)["lease_shard"] < 8 for run_id in stranded)
    assert result.jobs_resharded >= 8
    assert all(env.state(j)["sched_shard"] == shard_of(j, 8) for j in JOBS)

    env.clock.set(T0 + 2 * HOUR - 5_000)
    assert env.trigger().tick("t8").claimed == len(JOBS)  # every job, at its time
    assert all(env.runs_of(j)[0]["kind"] == RunKind.SCHEDULED.value for j in JOBS)

    # The dropped shards are empty: after an hour of finding them so, the detector stops
    # sweeping them.
    env.detector().run("d8-2")
    bookkeeping = env.store.get(STATE, BOOKKEEPING_KEY)
    assert bookkeeping is not None and bookkeeping["shard_high"] == 16 and "drained_since" in bookkeeping
    env.clock.advance(DRAIN_HOLD_MS)
    env.detector().run("d8-3")
    bookkeeping = env.store.get(STATE, BOOKKEEPING_KEY)
    assert bookkeeping is not None and bookkeeping["shard_high"] == 8 and "drained_since" not in bookkeeping


def test_raising_the_shard_count_spreads_the_jobs_already_registered(env: Env) -> None:
    env.cfg = default_cfg(shard_count=2)
    for job_id in JOBS[:6]:
        register_raw(env, job(job_id, "rate(1 hour)").to_item())
    env.cfg = default_cfg(shard_count=8)
    result = env.detector().run("d")  # moved at once: no stream record will come for it
    assert all(env.state(j)["sched_shard"] == shard_of(j, 8) for j in JOBS[:6])
    assert result.jobs_reconciled == sum(shard_of(j, 2) != shard_of(j, 8) for j in JOBS[:6])
    env.clock.set(T0 + HOUR - 5_000)
    assert env.trigger().tick("t").claimed == 6


def test_a_re_registration_with_the_same_timing_moves_the_job_to_its_shard(env: Env) -> None:
    env.cfg = default_cfg(shard_count=16)
    job_id = next(j for j in JOBS if shard_of(j, 16) >= 8)
    register_raw(env, job(job_id, "rate(1 hour)").to_item())
    env.cfg = default_cfg(shard_count=8)
    register_raw(env, job(job_id, "rate(1 hour)", description="edited").to_item())
    assert env.state(job_id)["sched_shard"] == shard_of(job_id, 8)
