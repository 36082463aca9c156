"""Write units of a proposed protocol, metered: docs/proposals/due-entry-on-runs.md.

Not the product. The product's units are metered by running its services (``write_units.py``);
this replays the writes the proposal would make for one short run, on the same MeteringStore
(DynamoDB's capacity rules), with the proposal's one index in place of the template's two. It is
here so that the proposal's figure is reproduced, not asserted: ``python -m
jobsched_tools.bench.due_entry_proposal``.

The proposal: the claim of occurrence N creates N+1's run as ``scheduled``, whose index entry
(its instant) is the job's due entry until it is claimed and its lease entry until it ends. A
claim then changes no index key, and each run enters and leaves one index once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jobsched.core.writes import RUNS, STATE, Put, Update, WriteOp, eq, not_exists

from jobsched_tools.fakes.metering import Index, MeteringStore

HOUR = 3_600_000
DEF_HASH = "sha256:" + "a" * 64

# The proposal's only index: runs by shard and check_at, keys only. The state table has none.
DUE_INDEX = Index("due", RUNS, ("lease_shard", "check_at"), "KEYS_ONLY", (), ("job_id", "run_id"))


@dataclass(frozen=True)
class ProposalUnits:
    state_advance: bool
    atomic: bool
    write_units_per_run: float
    write_units_per_heartbeat: float
    by_step: dict[str, float]
    by_table: dict[str, float]

    def as_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def _scheduled_run(job_id: str, occurrence: int) -> dict[str, Any]:
    """A run as the claim before it creates it: the attributes a pending run carries today, with
    ``status = scheduled`` and ``check_at`` = its instant."""
    return {
        "job_id": job_id,
        "run_id": f"{job_id}@{occurrence}",
        "scheduled_at": occurrence * HOUR,
        "kind": "scheduled",
        "status": "scheduled",
        "version": 1,
        "attempt": 1,
        "recoveries": 0,
        "def_hash": DEF_HASH,
        "overlap": "skip",
        "max_attempts": 3,
        "after_run_id": f"{job_id}@{occurrence - 1}",
        "lease_shard": 3,
        "check_at": occurrence * HOUR,
    }


def measure(state_advance: bool = True, runs: int = 20, atomic: bool = False) -> ProposalUnits:
    """``runs`` jobs, each with occurrence 1 scheduled: claim it (creating occurrence 2), start
    it, heartbeat once, commit it; the units per run. ``atomic``: the claim's writes as one
    transaction, as the product's claim has been since issue 25 (every item in it charged twice)."""
    store = MeteringStore()
    store.indexes = [DUE_INDEX]
    jobs = [f"u{index:04d}" for index in range(runs)]
    for job_id in jobs:
        store.write([Put(RUNS, _scheduled_run(job_id, 1), (), "set up")])
        state = {"job_id": job_id, "version": 1, "status": "active", "def_hash": DEF_HASH}
        state |= {"timing": {"schedule": "rate(1 hour)", "timezone": "UTC"}, "latest_run_id": f"{job_id}@0"}
        store.write([Put(STATE, state, (), "set up")])
    store.reset_meters()
    beats = 0
    for job_id in jobs:
        run = {"job_id": job_id, "run_id": f"{job_id}@1"}
        # The conditions are the proposal's (docs/proposals/due-entry-on-runs.md), abridged: the
        # meter charges a write by the items it changes, not by its condition.
        claim: list[WriteOp] = [
            Put(
                RUNS,
                _scheduled_run(job_id, 2),
                (not_exists("run_id", "made by a racer"),),
                "claim: create next",
            ),
            Update(
                RUNS,
                run,
                (eq("status", "scheduled", "claimed, recorded or cancelled"), eq("version", 1, "as read")),
                "claim: take run",
                set={
                    "status": "pending",
                    "version": 2,
                    "lease_expires_at": HOUR + 30_000,
                    "claimed_by": "tick-1",
                },
            ),
        ]
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
        if atomic:  # one TransactWriteItems, as the product's claim is since issue 25
            store.write(claim)
        else:
            for op in claim:
                store.write([op])
        store.update(
            Update(
                RUNS,
                run,
                (eq("status", "pending", "duplicate delivery"), eq("version", 2, "stale message")),
                "start",
                set={
                    "status": "running",
                    "version": 3,
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
        store.update(
            Update(
                RUNS,
                run,
                (eq("status", "running", "recovered"), eq("version", 3, "a stale worker")),
                "commit",
                set={"status": "succeeded", "version": 4, "expires_at": 9_999_999},
                remove=("check_at", "lease_shard", "lease_expires_at"),
            )
        )
    total = store.total_write_units() - beats
    return ProposalUnits(
        state_advance,
        atomic,
        total / runs,
        beats / runs,
        {label: units / runs for label, units in sorted(store.by_label.items()) if label != "heartbeat"},
        {name: units / runs for name, units in sorted(store.write_units.items())},
    )


if __name__ == "__main__":
    shapes = [(advance, atomic) for atomic in (False, True) for advance in (True, False)]
    print(json.dumps([measure(advance, atomic=atomic).as_json() for advance, atomic in shapes], indent=2))
