"""The chaos world on a migrating stack (issue 37; docs/proposals/successor-claim-build.md §5 "The
migration"): every job starts on today's claim, ``jobsched migrate successor-claim``'s write turns
the switch on at a seeded moment while claims, runs, retries and changes are in flight, and the
trigger, the registrar and the reconcile pass convert the legacy states (sim/migration.py).

The full size (30 jobs, 2 simulated hours, seeds 1, 2, 3, 4, 7) runs from the CLI
(``jobsched chaos --migrate-midway``; docs/chaos.md has the figures); here a reduced size."""

from __future__ import annotations

import functools
import json
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from jobsched.core.claim_shape import ClaimShape, stack_shape
from jobsched.core.head_change import EPOCH
from jobsched.core.run import parse_run_id
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY
from jobsched.core.writes import RUNS, STATE, Put
from jobsched_tools.cli.main import main
from jobsched_tools.sim import ChaosConfig, ChaosReport, FaultRates, migration, run_chaos
from jobsched_tools.sim.invariants import all_items
from jobsched_tools.sim.lease_store import LeaseIndexedMemoryStore
from jobsched_tools.sim.mutants import SUCCESSOR_SWITCHABLE, switched_off
from jobsched_tools.sim.world import World
from jobsched_tools.sim.world_state import switch_to_successor

SMALL = ChaosConfig(seed=1, jobs=10, hours=1, migrate_midway=True)


@functools.cache
def small_report(seed: int) -> ChaosReport:
    return run_chaos(replace(SMALL, seed=seed))


def _kinds(report: ChaosReport) -> Counter[str]:
    return Counter(v.split(" ", 1)[0] for v in report.invariant_violations)


def test_a_migrating_world_starts_legacy_with_all_three_indexes() -> None:
    world = World(replace(SMALL, hours=0.25, faults=FaultRates.none()))
    inner = world.store.inner
    assert isinstance(inner, LeaseIndexedMemoryStore)
    assert stack_shape(inner.get(STATE, dict(BOOKKEEPING_KEY))) is ClaimShape.LEGACY
    for index in ("next-run", "lease", "due"):  # ports.DEPLOYED_INDEXES["migrating"]
        inner.query(index, 0)  # a store without the index raises
    assert world.store.migrating and world.store.successor


@pytest.mark.parametrize("seed", (1, 3))
def test_the_switch_turned_on_mid_run_holds_every_invariant(seed: int) -> None:
    """Both parts of each job's history are there (records under today's ids before the switch,
    under epochs after), every legacy state was converted, and nothing is lost or duplicated."""
    world = World(replace(SMALL, seed=seed))
    report = world.run()
    assert report.invariant_violations == [], report.invariant_violations[:5]
    assert report.duplicate_commits == report.duplicate_effects == report.lost_occurrences == 0
    assert report.committed_runs + report.policy_misses + report.backlogged == report.occurrences_due
    figures = report.migration
    assert figures["landed_inside_a_legacy_claim"] is True
    assert figures["legacy_states_at_switch"] > 0 and figures["legacy_states_left"] == 0
    assert figures["legacy_states_converted"] >= figures["legacy_states_at_switch"]
    runs = all_items(world.store.inner, RUNS)
    committed = [r for r in runs if r.get("status") in ("succeeded", "failed")]
    epochs = Counter(parse_run_id(str(r["run_id"])).epoch > 0 for r in committed)
    assert epochs[False] > 20 and epochs[True] > 20, epochs  # legacy ids, then epoch ids
    states = [s for s in all_items(world.store.inner, STATE) if s.get("status") == "active"]
    assert states and all(EPOCH in s and "next_run_at" not in s for s in states)


def test_each_step_of_a_migrating_world_reads_the_switch_anew() -> None:
    """A function invocation reads the switch once (runtime/wiring.py builds its registrar per
    invocation); the simulation's services live the whole run, so each step forgets the switch its
    registrar read. Without that, a registrar that read it off before the switch keeps registering
    today's way after it (this test's second job gets a next-run entry)."""
    world = World(replace(SMALL, hours=0.25, faults=FaultRates.none()))
    first, second = world.jobs[0].definition, world.jobs[1].definition
    world.call("operator", lambda: world.ops.register(first))
    assert "next_run_at" in (world.store.inner.get(STATE, {"job_id": first.job_id}) or {})
    switch_to_successor(world.store.inner, world.clock.now_ms())
    world.call("operator", lambda: world.ops.register(second))
    state = world.store.inner.get(STATE, {"job_id": second.job_id}) or {}
    assert EPOCH in state and "next_run_at" not in state, state


def test_after_the_switch_the_ticks_claim_every_head_on_time() -> None:
    """Liveness the misfire policies would hide: in a quiet world the ticks claim every head after
    the switch, and the detector settles none late (no catch-up, miss or late run). Each tick reads
    the switch anew (``Migration.call``); a trigger that kept the switch it read before the flip
    claimed no head after it, and the detector ran every occurrence late under its policy."""
    world = World(replace(SMALL, seed=2, faults=FaultRates.none()))
    report = world.run()
    switched = world.migration.switched_at
    assert switched is not None and report.invariant_violations == []
    assert report.migration["head_claims_by_ticks"] > 50
    late = [
        e for e in world.entries if e.at > switched and e.what in ("run.catchup", "run.missed", "run.late")
    ]
    assert late == [], late[:3]


def test_the_checks_fail_a_world_whose_switch_never_lands(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks can fail: with the operator's write dropped (the switch stays off, every job
    claims as today), the run reports the switch missing, every active job without a head (H1)
    and with its next-run entry (registration_not_converged)."""
    monkeypatch.setattr(migration, "write_switch", lambda *_args, **_kwargs: True)
    report = run_chaos(replace(SMALL, hours=0.5, faults=FaultRates.none()))
    kinds = _kinds(report)
    assert set(kinds) == {"migration_not_switched", "H1_one_head", "registration_not_converged"}, kinds
    assert report.migration["legacy_states_left"] > 0


def test_a_legacy_jobs_writes_keep_todays_checks_until_converted() -> None:
    """The legacy part of a job's history keeps today's per-write checks (sim/ledger.py
    ``migrating``): a record beyond a legacy state's next-run position is reported; the same
    record of a converted job (an epoch on its state) is the successor checks' to judge."""
    world = World(replace(SMALL, hours=0.25, faults=FaultRates.none()))
    store = world.store
    state = {"job_id": "job-a", "status": "active", "version": 3, "next_run_at": 1_000_000}
    state["last_scheduled_at"] = 500_000
    store.inner.write([Put(STATE, state, condition=(), label="seed")])
    run = {
        "job_id": "job-a",
        "run_id": "job-a@1970-01-01T00:33:20Z",  # 2_000_000: beyond next_run_at
        "scheduled_at": 2_000_000,
        "kind": "scheduled",
        "status": "succeeded",
        "version": 1,
    }
    store.write([Put(RUNS, run, condition=(), label="put run")])
    assert "record_beyond_position" in store.ledger.core, dict(store.ledger.core)
    store.ledger.core.clear()
    converted = {k: v for k, v in state.items() if k != "next_run_at"} | {EPOCH: 4, "version": 4}
    store.inner.write([Put(STATE, converted, condition=(), label="seed")])
    later = {**run, "run_id": "job-a@1970-01-01T00:50:00Z", "scheduled_at": 3_000_000}
    store.write([Put(RUNS, later, condition=(), label="put run")])
    assert "record_beyond_position" not in store.ledger.core, dict(store.ledger.core)


def test_the_conversions_state_condition_switched_off_is_caught() -> None:
    """``_state_op:_state_unchanged`` (the conversion is conditional on the state's version): off,
    a tick that read the switch before it flipped claims the job between a conversion's read and
    its write, and the conversion makes a head at the instant the legacy claim just recorded:
    seed 1 reports two live records at one instant (the ledger's record_created_twice, I1')."""
    assert small_report(1).invariant_violations == []
    with switched_off("_state_op:_state_unchanged", successor=True):
        report = run_chaos(SMALL)
    assert {"record_created_twice", "I1prime_one_live_record"} <= set(_kinds(report)), _kinds(report)


def test_the_conversions_head_condition_is_redundant_and_caught_with_the_state_one() -> None:
    """``convert_legacy_ops:_run_is_new`` (the first head's key is empty): a head of epoch E is
    only ever written by a write that moves the state's version to E, so behind ``_state_unchanged``
    no conversion meets one. Off alone, seed 3 holds; ``_state_unchanged`` off alone holds too,
    since a second converter inside a conversion (the registrar) makes the outer one's head put
    fail; both off, the outer conversion overwrites the first's head (record_overwritten)."""
    config = replace(SMALL, seed=3)
    assert "convert_legacy_ops:_run_is_new" in SUCCESSOR_SWITCHABLE
    assert small_report(3).invariant_violations == []
    assert small_report(3).migration["second_converters"] > 0
    with switched_off("convert_legacy_ops:_run_is_new", successor=True):
        assert run_chaos(config).invariant_violations == []
    with switched_off("_state_op:_state_unchanged", successor=True):
        assert run_chaos(config).invariant_violations == []
    with switched_off("_state_op:_state_unchanged", "convert_legacy_ops:_run_is_new", successor=True):
        report = run_chaos(config)
    assert "record_overwritten" in _kinds(report), _kinds(report)


def test_the_cli_runs_a_migrating_world_reproducibly(capsys: pytest.CaptureFixture[str]) -> None:
    runs = []
    for _ in range(2):
        with pytest.raises(SystemExit) as exit_info:
            main(["chaos", "--migrate-midway", "--seed", "2", "--jobs", "8", "--hours", "0.5", "--json"])
        assert exit_info.value.code == 0
        data: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        data.pop("wall_seconds")
        runs.append(data)
    assert runs[0] == runs[1]
    assert runs[0]["invariant_violations"] == []
    assert runs[0]["migration"]["switched_at"] is not None
    assert runs[0]["migration"]["legacy_states_converted"] > 0


def test_other_worlds_report_no_migration() -> None:
    """A legacy or successor world's report is as it was: no ``migration`` key, no line."""
    report = run_chaos(ChaosConfig(seed=2, jobs=4, hours=0.25, faults=FaultRates.none()))
    assert "migration" not in report.to_json()
    assert "migration" not in report.summary()
