"""A replay, write by write, of the cost study's shapes that change the data model (each run's
index entry made one occurrence ahead, docs/proposals/due-entry-on-runs.md): they have no services
to run, so their writes are replayed item by item on the study's ShapedStore
(bench/shaped_store.py). ``due_entry_proposal.py``, the proposal's own figures, replays through it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobsched.core.transitions import LEASE_ATTRIBUTES
from jobsched.core.writes import JOBS, RUNS, STATE, Put, Update, WriteOp, eq, not_exists

from jobsched_tools.bench.shaped_store import HOUR, ShapedStore
from jobsched_tools.fakes.metering import Index

DEF_HASH = "sha256:" + "a" * 64


# The proposal's index, keys only, and shape f's: the same key, with
# the immutable attributes a claim needs (set when the run is created, never changed by a claim,
# a start or a heartbeat), so that the trigger reads no run to claim it.
DUE_KEYS_ONLY = Index("due", RUNS, ("lease_shard", "check_at"), "KEYS_ONLY", (), ("job_id", "run_id"))
DUE_CLAIMABLE = Index(
    "due",
    RUNS,
    ("lease_shard", "check_at"),
    "INCLUDE",
    (
        "scheduled_at",
        "next_at",
        "next_key",
        "timing",
        "def_hash",
        "after_run_id",
        "kind",
        "overlap",
        "max_attempts",
    ),
    ("job_id", "run_id"),
)
TIMING = {"schedule": "rate(1 hour)", "timezone": "UTC"}


def _scheduled_run(job_id: str, occurrence: int, overlap: str, timing_on_run: bool) -> dict[str, Any]:
    run = {
        "job_id": job_id,
        "run_id": f"{job_id}@{occurrence}",
        "scheduled_at": occurrence * HOUR,
        "kind": "scheduled",
        "status": "scheduled",
        "version": 1,
        "attempt": 1,
        "recoveries": 0,
        "def_hash": DEF_HASH,
        "overlap": overlap,
        "max_attempts": 3,
        "after_run_id": f"{job_id}@{occurrence - 1}",
        "lease_shard": 3,
        "check_at": occurrence * HOUR,
    }
    if timing_on_run:  # what a claimer needs to make the next one, without reading the state
        run |= {
            "timing": dict(TIMING),
            "next_at": (occurrence + 1) * HOUR,
            "next_key": f"{job_id}@{occurrence + 1}",
        }
    return run


@dataclass(frozen=True)
class Replayed:
    store: ShapedStore
    write_units_per_run: float
    write_units_per_heartbeat: float
    by_step: dict[str, float]
    run_after_commit: dict[str, Any]
    run_scheduled: dict[str, Any]
    state: dict[str, Any]


def replay_due_entry(
    *,
    state_advance: bool,
    take: bool,
    atomic: bool,
    keep_entry: bool = False,
    ttl_charges_indexes: bool = True,
    index: Index = DUE_KEYS_ONLY,
    overlap: str = "skip",
    payload_bytes: int = 0,
    runs: int = 4,
) -> Replayed:
    """``runs`` jobs, each with occurrence 1 scheduled, claimed (creating occurrence 2), started,
    heartbeating once and committed, as one of the due-entry shapes would write them:

    - ``state_advance``: the claim also advances the state (the proposal as written);
    - ``take``: the claim moves occurrence 1 from ``scheduled`` to ``pending`` (the proposal);
      without it the claim is the creation of occurrence 2 alone (shape f, the successor claim);
    - ``atomic``: the claim's writes as one TransactWriteItems (one write needs none);
    - ``keep_entry``: the commit leaves the index entry for TTL (shapes b, c).

    The job's definition and payload live in the jobs table, written at registration only."""
    store = ShapedStore(indexes=[index])
    timing_on_run = not state_advance
    for number in range(runs):
        job_id = f"u{number:04d}"
        store.write([Put(RUNS, _scheduled_run(job_id, 1, overlap, timing_on_run), (), "set up")])
        state = {"job_id": job_id, "version": 1, "status": "active", "def_hash": DEF_HASH, "timing": TIMING}
        store.write([Put(STATE, state | {"latest_run_id": f"{job_id}@0"}, (), "set up")])
        job = {"job_id": job_id, "schedule": TIMING["schedule"], "target": "noop", "overlap": overlap}
        store.write(
            [
                Put(
                    JOBS,
                    job | ({"payload": {"blob": "x" * payload_bytes}} if payload_bytes else {}),
                    (),
                    "set up",
                )
            ]
        )
    store.reset_meters()
    beats = 0
    for number in range(runs):
        job_id = f"u{number:04d}"
        run = {"job_id": job_id, "run_id": f"{job_id}@1"}
        claim: list[WriteOp] = [
            Put(
                RUNS,
                _scheduled_run(job_id, 2, overlap, timing_on_run),
                (not_exists("run_id", "claimed by a racer, or the head closed by a change"),),
                "claim: create next",
            )
        ]
        if take:
            claim.append(
                Update(
                    RUNS,
                    run,
                    (
                        eq("status", "scheduled", "claimed, recorded or cancelled"),
                        eq("version", 1, "as read"),
                    ),
                    "claim: take run",
                    set={
                        "status": "pending",
                        "version": 2,
                        "lease_expires_at": HOUR + 30_000,
                        "claimed_by": "t1",
                    },
                )
            )
        if state_advance:
            claim.append(
                Update(
                    STATE,
                    {"job_id": job_id},
                    (eq("version", 1, "a change or a racer"),),
                    "claim: advance state",
                    set={"version": 2, "latest_run_id": run["run_id"], "last_scheduled_at": HOUR},
                )
            )
        if atomic or len(claim) == 1:
            store.write(claim)
        else:
            for op in claim:
                store.write([op])
        version = 2 if take else 1
        store.update(
            Update(
                RUNS,
                run,
                (
                    eq("status", "pending" if take else "scheduled", "duplicate delivery"),
                    eq("version", version, "stale"),
                ),
                "start",
                set={
                    "status": "running",
                    "version": version + 1,
                    "owner": "w-" + "b" * 36,
                    "lease_expires_at": HOUR + 31_000,
                },
            )
        )
        before = store.total_write_units()
        store.update(
            Update(
                RUNS,
                run,
                (eq("status", "running", "recovered"),),
                "heartbeat",
                set={"lease_expires_at": HOUR + 41_000},
            )
        )
        beats += store.total_write_units() - before
        gone = ("lease_expires_at",) if keep_entry else LEASE_ATTRIBUTES
        store.update(
            Update(
                RUNS,
                run,
                (eq("status", "running", "recovered"), eq("version", version + 1, "a stale worker")),
                "commit",
                set={"status": "succeeded", "version": version + 2, "expires_at": 9_999_999},
                remove=gone,
            )
        )
    run_after_commit = dict(store.tables[RUNS][("u0000", "u0000@1")])
    run_scheduled = dict(store.tables[RUNS][("u0000", "u0000@2")])
    state_item = dict(store.tables[STATE]["u0000"])
    if keep_entry:
        store.expire_by_ttl(ttl_charges_indexes)
    total = store.total_write_units() - beats
    labels = {label: units / runs for label, units in sorted(store.by_label.items()) if label != "heartbeat"}
    return Replayed(store, total / runs, beats / runs, labels, run_after_commit, run_scheduled, state_item)
