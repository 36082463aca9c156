"""The scheduler's tunables as one validated model.

Pure: the runtime's settings (``runtime/settings.py``) read the environment and build this; tests
and the simulation build it directly. Risky values are bounded here so that a bad deploy-time
parameter fails loudly at cold start instead of silently breaking a guarantee.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

# The most shards the indexes may have, and so the most trigger groups (one shard at least each).
MAX_SHARDS = 256
# The dispatch lease's bounds (template.yaml DispatchLeaseSeconds' MinValue, MaxValue): also the
# delays a head can have been entered into the due index with (core/head.py, HC7).
MIN_DISPATCH_LEASE_SECONDS, MAX_DISPATCH_LEASE_SECONDS = 5, 900


class SchedulerConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    shard_count: int = Field(
        16, ge=1, le=MAX_SHARDS, description="Partitions of the next-run and lease indexes."
    )
    trigger_groups: int = Field(
        16,
        ge=1,
        le=MAX_SHARDS,
        description="Concurrent trigger invocations per tick, each claiming the shards s with "
        "s % groups == its group (core/shard_groups.py). Above shard_count it acts as shard_count "
        "(a group per shard): see ``groups_per_tick``.",
    )
    lookahead_seconds: int = Field(
        90,
        ge=1,
        le=900,
        description="The trigger claims occurrences due this far ahead (SQS delay limit 900).",
    )
    lease_seconds: int = Field(30, ge=5, le=900, description="A running worker's lease between heartbeats.")
    heartbeat_seconds: int = Field(
        10, ge=1, le=300, description="How often a running worker renews its lease."
    )
    dispatch_lease_seconds: int = Field(
        30,
        ge=MIN_DISPATCH_LEASE_SECONDS,
        le=MAX_DISPATCH_LEASE_SECONDS,
        description="How long a claimed run may wait for a worker to start it; also how soon a "
        "worker that died before its first heartbeat is recovered.",
    )
    trigger_lookback_seconds: int = Field(
        300,
        ge=0,
        le=86_400,
        description="The trigger claims late occurrences up to this old (capped by each job's grace); "
        "older ones are the miss detector's, under the job's misfire policy.",
    )
    claim_concurrency: int = Field(
        16, ge=1, le=64, description="Jobs the trigger claims in parallel (each job's claims stay in order)."
    )
    max_claims_per_tick: int = Field(
        50_000,
        ge=1,
        le=1_000_000,
        description="A safety cap on one tick's claims; the tick also stops at its Lambda deadline.",
    )
    # At most a quarter of the 60 s timeout the trigger, the detector and the registrar have: a
    # margin near a function's timeout would leave it no time to work (issue 27 item 8).
    deadline_margin_ms: int = Field(
        3000, ge=0, le=15_000, description="Stop new work this long before timeout."
    )
    detector_max_items: int = Field(1000, ge=1, le=100_000, description="Most recoveries per detector run.")
    detector_sweep_seconds: int = Field(
        10,
        ge=0,
        le=300,
        description="One detector invocation sweeps this often until its deadline (0: once), so "
        "recovery does not wait for the next once-a-minute schedule.",
    )
    detector_idle_return: bool = Field(
        True,
        description="A detector invocation that finds no lease held and no job due before its "
        "deadline plus the lookahead returns after its first sweep (an idle stack then costs "
        "~$1.5 a month, not ~$16); a lease made after it returned by anything but a tick (a new "
        "job's first claim by the registrar, a manual run) wakes it (services/waking.py). False: "
        "always sweep.",
    )
    detector_degrade_backlog: int = Field(
        5000,
        ge=1,
        le=10_000_000,
        description="Above this backlog, run_all catch-up is coalesced to run_once.",
    )
    history_retention_days: int = Field(30, ge=1, le=3650)
    clock_skew_allowance_ms: int = Field(
        2000, ge=0, le=60_000, description="A lease counts as expired only this long after its expiry."
    )
    min_rate_seconds: int = Field(10, ge=1, le=3600)

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> SchedulerConfig:
        # A heartbeat period of half the lease tolerates one lost or slow heartbeat.
        if self.heartbeat_seconds * 2 > self.lease_seconds:
            raise ValueError("heartbeat_seconds must be at most half of lease_seconds")
        return self

    @property
    def groups_per_tick(self) -> int:
        """The trigger invocations a tick starts: a group with no shard would claim nothing,
        every tick, so there are never more groups than shards. Clamped rather than rejected, so
        that a small ShardCount (a dev stack, the local stack) works with the default groups."""
        return min(self.trigger_groups, self.shard_count)
