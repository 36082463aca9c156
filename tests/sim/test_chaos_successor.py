"""The chaos world on a successor-shaped stack (issue 37; docs/proposals/successor-claim-build.md §4,
the "chaos" row): the ``due`` index in the store, the migration switch on before the first job
registers, and the checks read heads, markers and epochs (sim/successor.py, sim/ledger.py)."""

from __future__ import annotations

import functools
import json
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
from jobsched.core.claim_shape import ClaimShape, stack_shape
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY
from jobsched.core.writes import RUNS, STATE, Put, Update
from jobsched_tools.cli.main import main
from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.sim import ChaosConfig, ChaosReport, FaultRates, run_chaos, world_state
from jobsched_tools.sim.lease_store import LeaseIndexedMemoryStore
from jobsched_tools.sim.ledger import StateMark
from jobsched_tools.sim.mutants import switched_off
from jobsched_tools.sim.successor import finished_at_once, live_records
from jobsched_tools.sim.world import World

JOB = "job-a"
T1 = 1_780_000_020_000  # an instant (ms)
T1_ISO = "2026-05-28T20:27:00Z"


def _quiet(seed: int = 1) -> ChaosConfig:
    return ChaosConfig(seed=seed, jobs=4, hours=0.25, successor=True, faults=FaultRates.none())


def test_the_successor_world_has_the_due_index_and_the_switch_on() -> None:
    world = World(_quiet())
    inner = world.store.inner
    assert isinstance(inner, LeaseIndexedMemoryStore)
    assert stack_shape(inner.get(STATE, dict(BOOKKEEPING_KEY))) is ClaimShape.SUCCESSOR
    inner.query("due", 0)  # the index exists (a store without it raises)
    legacy = World(ChaosConfig(seed=1, jobs=4, hours=0.25)).store.inner
    assert stack_shape(legacy.get(STATE, dict(BOOKKEEPING_KEY))) is ClaimShape.LEGACY
    with pytest.raises(ValueError, match="does not have the specified index"):
        legacy.query("due", 0)


def _head(run_id: str, at: int, **extra: object) -> dict[str, object]:
    return {
        "job_id": JOB,
        "run_id": run_id,
        "scheduled_at": at,
        "kind": "scheduled",
        "status": "scheduled",
        "lease_shard": 3,
        "check_at": at + 30_000,
        "epoch": 1,
        "timing": {"kind": "rate", "every_seconds": "60"},
        "version": 0,
        **extra,
    }


def test_the_lease_store_answers_the_due_index_as_the_memory_store_does() -> None:
    """The fast query over leased runs (sim/lease_store.py) gives MemoryStore's entries, projected
    as ``due`` projects (INCLUDE: timing, epoch ...), in the same order, over pages."""
    fast = LeaseIndexedMemoryStore(extra_indexes=("due",))
    plain = MemoryStore(extra_indexes=("due",))
    items = [_head(f"{JOB}@2026-05-28T20:{27 + n}:00Z#1", T1 + n * 60_000) for n in range(5)]
    items.append({**_head(f"{JOB}@2026-05-28T20:40:00Z#1", T1), "status": "succeeded"})
    del items[-1]["check_at"]  # a settled run leaves the index
    for store in (fast, plain):
        store.write([Put(RUNS, item, condition=(), label="seed") for item in items])
    pages_fast, pages_plain = [], []
    for store, pages in ((fast, pages_fast), (plain, pages_plain)):
        cursor = None
        while True:
            page = store.query("due", 3, sort_to=T1 + 10 * 60_000, limit=2, cursor=cursor)
            pages.append(page.items)
            if page.cursor is None:
                break
            cursor = page.cursor
    assert pages_fast == pages_plain
    assert sum(len(p) for p in pages_fast) == 5
    assert pages_fast[0][0]["timing"] == {"kind": "rate", "every_seconds": "60"}
    assert "status" not in pages_fast[0][0]  # not projected (the plan's §1: the start writes it)


def _item(run_id: str, status: str, **extra: object) -> dict[str, object]:
    return {"run_id": run_id, "job_id": JOB, "status": status, **extra}


def test_live_records_count_per_instant_over_epochs_not_markers_or_cancelled_heads() -> None:
    legacy, later = f"{JOB}@{T1_ISO}", f"{JOB}@{T1_ISO}#4"
    items = [
        _item(legacy, "succeeded", kind="scheduled"),
        _item(f"{JOB}@{T1_ISO}#2", "cancelled", epoch=2),  # a cancelled head
        _item(f"{JOB}@{T1_ISO}#3", "closed", epoch=3),  # a closure marker
        _item(f"{JOB}@end:{T1_ISO}#3", "end", epoch=3),  # an end marker
    ]
    runs = {str(item["run_id"]): item for item in items}
    assert live_records(runs) == {(JOB, T1): [legacy]}
    runs[later] = _item(later, "pending")
    assert sorted(live_records(runs)[(JOB, T1)]) == [legacy, later]


def test_active_with_no_head_and_its_end_marker_reads_finished() -> None:
    end = {"run_id": f"{JOB}@end:{T1_ISO}#2", "job_id": JOB, "status": "end", "epoch": 2}
    state = {"job_id": JOB, "status": "active", "epoch": 2}
    assert finished_at_once(state, {end["run_id"]: end})
    assert not finished_at_once({**state, "epoch": 3}, {end["run_id"]: end})  # another life's marker
    head = _head(f"{JOB}@2026-05-28T20:28:00Z#3", T1 + 60_000, next_key=f"{JOB}@2026-05-28T20:29:00Z#3")
    assert not finished_at_once({**state, "epoch": 3}, {end["run_id"]: end, head["run_id"]: head})
    assert not finished_at_once({**state, "status": "paused"}, {end["run_id"]: end})


def test_the_ledger_sees_a_second_live_record_at_an_instant_and_a_scheduled_runs_due_entry() -> None:
    """``record_created_twice`` per instant (two epochs' ids live at once), and a ``scheduled`` run
    whose only lease is its ``due`` entry is no run without a lease; without the entry it is."""
    world = World(_quiet())
    store = world.store
    head = _head(f"{JOB}@{T1_ISO}#1", T1, next_key=f"{JOB}@2026-05-28T20:28:00Z#1")
    store.write([Put(RUNS, head, condition=(), label="put head")])
    assert store.ledger.seen == []
    store.write([Put(RUNS, {**head, "run_id": f"{JOB}@{T1_ISO}#2", "epoch": 2}, condition=(), label="put")])
    assert [kind for kind, _, _ in store.ledger.seen] == ["record_created_twice"]
    store.ledger.seen.clear()
    first = {"job_id": JOB, "run_id": f"{JOB}@{T1_ISO}#1"}
    cancel = Update(RUNS, first, set={"status": "cancelled"}, condition=(), label="cancel head")
    store.write([cancel])
    store.write([Put(RUNS, {**head, "run_id": f"{JOB}@{T1_ISO}#3", "epoch": 3}, condition=(), label="put")])
    assert [kind for kind, _, _ in store.ledger.seen] == ["record_created_twice"]  # #2 is still live
    store.ledger.seen.clear()
    no_entry = {k: v for k, v in head.items() if k != "check_at"}
    store.write([Put(RUNS, {**no_entry, "run_id": f"{JOB}@2026-05-28T21:00:00Z#1"}, condition=(), label="p")])
    assert [kind for kind, _, _ in store.ledger.seen] == ["run_without_lease"]


def test_an_end_marker_ends_the_stretch_at_its_instant() -> None:
    world = World(_quiet())
    store = world.store
    timing = (("every_seconds", "60"), ("kind", "rate"))
    store.ledger.states[JOB] = [StateMark(T1 - 60_000, "active", timing, None, None, T1)]
    end = {"job_id": JOB, "run_id": f"{JOB}@end:{T1_ISO}#1", "status": "end", "epoch": 1}
    store.write([Put(RUNS, end, condition=(), label="end marker")])
    last = store.ledger.states[JOB][-1]
    assert (last.status, last.last_scheduled_at) == ("finished", T1)


def test_a_closure_marker_at_an_end_key_ends_no_stretch() -> None:
    """A settle that decides a life's last head missed closes the end key with a closure marker
    (``closed``) and the life goes on (a miss is no run of ``max_runs``): the stretch stays open.
    Before, any item at an end key ended it, and capacity squeezes on a successor stack (seed 3,
    30 jobs, 2 h) reported the life's later records ``run_not_due``."""
    world = World(_quiet())
    store = world.store
    timing = (("every_seconds", "60"), ("kind", "rate"))
    store.ledger.states[JOB] = [StateMark(T1 - 60_000, "active", timing, None, None, T1)]
    closed = {"job_id": JOB, "run_id": f"{JOB}@end:{T1_ISO}#1", "status": "closed", "epoch": 1}
    store.write([Put(RUNS, closed, condition=(), label="settle: close the end key")])
    assert store.ledger.states[JOB][-1].status == "active"


@functools.cache
def successor_report(seed: int) -> ChaosReport:
    return run_chaos(ChaosConfig(seed=seed, jobs=30, hours=2, successor=True))


# The legacy chaos's fixed seeds' size (tests/sim/test_chaos.py): 30 jobs, 2 simulated hours, every
# fault kind at its default rate, with the services' successor paths (h/w2trigger, h/w2detector,
# h/w2registrar, h/w2ops) merged.
SEEDS = (2, 3, 4, 7)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.timeout(300)
def test_a_successor_seed_holds_every_invariant(seed: int) -> None:
    report = successor_report(seed)
    kinds = Counter(v.split(" ", 1)[0] for v in report.invariant_violations)
    assert report.invariant_violations == [], (seed, dict(kinds), report.invariant_violations[:5])
    assert report.duplicate_commits == report.duplicate_effects == report.lost_occurrences == 0
    assert report.occurrences_due > 500
    settled = report.committed_runs + report.policy_misses + report.backlogged
    assert settled == report.occurrences_due
    assert report.leases_recovered > 0


@pytest.mark.timeout(300)
def test_seed_1_a_rerun_of_a_closed_missed_head() -> None:
    """Seed 1 pauses job-0029-cron at 03:25:30: its 03:25 head is decided missed behind the pause's
    closure marker, and a backfill at 03:40 reruns that record (plan §1 "rerun missed"). H3 lets a
    rerun of a missed record run (core/head_invariants.py ``closed_heads``); before it did, this seed
    reported ``H3_closed_head``."""
    report = successor_report(1)
    assert report.invariant_violations == [], report.invariant_violations[:3]


@pytest.mark.parametrize("store", ("memory", "moto"))
@pytest.mark.timeout(300)
def test_a_quiet_successor_world_holds_every_invariant(store: str) -> None:
    """No faults: every job registers successor-shaped (an epoch, a head, no next-run entry), every
    occurrence due commits, on the in-memory store and on moto (its due index from ``provision``)."""
    report = run_chaos(replace(_quiet(), store=store))
    assert report.invariant_violations == []
    assert report.occurrences_due > 10
    assert report.committed_runs + report.policy_misses == report.occurrences_due


def test_the_successor_checks_fail_a_world_whose_services_ignore_the_switch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checks can fail: with the switch left off (the services then claim as today), the
    successor world's checks find every active job without a head (H1) and with its next-run
    entry (registration_not_converged), and nothing else."""
    monkeypatch.setattr(world_state, "switch_to_successor", lambda _store, _now: None)
    report = run_chaos(_quiet(2))
    kinds = Counter(v.split(" ", 1)[0] for v in report.invariant_violations)
    assert set(kinds) == {"H1_one_head", "registration_not_converged"}, dict(kinds)
    assert report.occurrences_due > 0
    assert report.lost_occurrences == report.duplicate_commits == 0


def test_the_cli_runs_a_successor_world_reproducibly(capsys: pytest.CaptureFixture[str]) -> None:
    runs = []
    for _ in range(2):
        with pytest.raises(SystemExit) as exit_info:
            main(["chaos", "--successor", "--seed", "2", "--jobs", "8", "--hours", "0.5", "--json"])
        assert exit_info.value.code == 0
        data: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        data.pop("wall_seconds")
        runs.append(data)
    assert runs[0] == runs[1]
    assert runs[0]["occurrences_due"] > 50 and runs[0]["invariant_violations"] == []
    assert sum(runs[0]["faults_injected"].values()) > 0


@pytest.mark.timeout(300)
def test_the_successor_claims_condition_switched_off_is_caught() -> None:
    """``claim_head_op:_successor_absent`` (the claim is one put of the head's successor, only
    where none is): off, a tick interleaved in another's claim, or a person's manual run inside
    it, puts the successor over the first claim's: seed 1 (20 jobs, 1 h) reports the overwrite
    (and, as the services stood earlier, two live records at an instant: I1'). The same seed holds
    with the part in place."""
    config = ChaosConfig(seed=1, jobs=20, hours=1, successor=True)
    assert run_chaos(config).invariant_violations == []
    with switched_off("claim_head_op:_successor_absent", successor=True):
        report = run_chaos(config)
    kinds = {v.split(" ", 1)[0] for v in report.invariant_violations}
    assert "record_overwritten" in kinds, kinds


def test_leases_of_5_s_are_recovered_within_them_and_a_fixed_check_delay_is_late(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 37's "recovery of a crashed run within a lease plus the skew allowance" on a successor
    stack with LeaseSeconds and DispatchLeaseSeconds 5 (``recovery_late``: no run recovered after a
    clean detector run that began past its lapse). A head keeps its ``due`` entry through its claim
    and start: with its check delay fixed at 30 s (HC7's old constant) the detector meets a worker
    that died at its start, or a lost dispatch, a minute late."""
    config = ChaosConfig(seed=1, jobs=20, hours=1, successor=True, lease_seconds=5)
    report = run_chaos(config)
    assert report.invariant_violations == [] and report.leases_recovered > 0
    import sys

    from jobsched.core import head

    following = head.head_check_delay_ms
    for module in list(sys.modules.values()):
        named = getattr(module, "__name__", "")
        if named.startswith("jobsched.") and vars(module).get("head_check_delay_ms") is following:
            monkeypatch.setattr(module, "head_check_delay_ms", lambda _cfg: 30_000)
    late = run_chaos(config).invariant_violations
    assert late and all(v.startswith("recovery_late") for v in late), late[:3]
