"""The successor claim (core/transitions/head_claim.py), applied to the product's in-memory store:
one put of N's successor, the end marker for a life's last run, the races the model names (a
retried tick, a racing claimer, a claim meeting a marker, a claim against a settle: HC9), and its
unit price (one PutItem: 1 write unit + 1 index entry)."""

from __future__ import annotations

import pytest
from head_items import CFG, MINUTE, T0, get, head, job, key, store_with, without
from jobsched.core.errors import ConditionFailed
from jobsched.core.head import ends_life, head_check_delay_ms, is_end_marker
from jobsched.core.run import RunStatus, end_run_id, run_id_for
from jobsched.core.transitions.head_claim import (
    ClaimRace,
    after_failed_claim,
    claim_head_op,
    claimed_run_message,
)
from jobsched.core.writes import RUNS, Put
from jobsched_tools.fakes.metering import MeteringStore

NOW = T0 - 30_000  # the trigger claims 30 s ahead of the instant


def test_the_claim_puts_the_next_head_linked_behind_n() -> None:
    n = head(after_run_id="j@earlier#1", runs_before=0)
    store = store_with(n)
    put = claim_head_op(n, NOW, "t/1", CFG)
    store.write([put])
    successor = get(store, n["next_key"])
    assert successor is not None and successor["run_id"] == key(T0 + 5 * MINUTE)
    assert successor["status"] == RunStatus.SCHEDULED.value and successor["epoch"] == 1
    assert successor["after_run_id"] == n["run_id"] and successor["through"] == T0
    assert successor["claimed_by"] == "t/1" and successor["claimed_at"] == NOW
    assert successor["next_key"] == key(T0 + 10 * MINUTE)
    assert successor["check_at"] == T0 + 5 * MINUTE + head_check_delay_ms(CFG)
    assert successor["def_hash"] == n["def_hash"] and successor["timing"] == n["timing"]
    assert successor["runs_before"] == 0  # no max_runs: not counted, as today's claim
    assert get(store, n["run_id"]) == n  # nothing is written on N


def test_the_claim_is_one_put_one_write_unit_and_one_index_entry() -> None:
    n = head()
    store = MeteringStore()
    store.write([Put(RUNS, n, (), "set-up")])
    store.write_units.clear()
    store.request_counts.clear()
    put = claim_head_op(n, NOW, "t/1", CFG)
    assert isinstance(put, Put) and len(put.condition) == 1
    store.write([put])
    # Not a transaction (the meter's own read of the item after the write is not the claim's).
    assert store.request_counts["PutItem"] == 1 and "TransactWriteItems" not in store.request_counts
    # 1 unit for the item (under 1 KB) and 1 for its due entry (today's lease index, keyed
    # lease_shard/check_at, stands in for the due index until it exists).
    assert dict(store.write_units) == {"runs": 1, "runs/lease": 1}


def test_a_second_claim_of_the_same_head_fails_and_the_first_stands() -> None:
    # The part that makes exactly one claimer decide N (model: claim.successor_absent).
    n = head()
    store = store_with(n)
    store.write([claim_head_op(n, NOW, "t/1", CFG)])
    with pytest.raises(ConditionFailed):
        store.write([claim_head_op(n, NOW + 1, "t/2", CFG)])
    successor = get(store, n["next_key"])
    assert successor is not None and successor["claimed_by"] == "t/1"
    assert after_failed_claim(n, successor, "t/2") is ClaimRace.TAKEN  # t/2 sends nothing
    # Without the part the second claimer overwrites the first's head: both send N's message.
    store.write(without([claim_head_op(n, NOW + 1, "t/2", CFG)], "claim.successor_absent"))
    assert get(store, n["next_key"])["claimed_by"] == "t/2"  # type: ignore[index]


def test_a_retried_tick_finds_its_own_claim_and_sends_again() -> None:
    n = head()
    store = store_with(n)
    store.write([claim_head_op(n, NOW, "t/1", CFG)])  # its answer was lost
    with pytest.raises(ConditionFailed) as lost:
        store.write([claim_head_op(n, NOW + 2_000, "t/1", CFG)])
    assert after_failed_claim(n, lost.value.current, "t/1") is ClaimRace.OURS
    assert after_failed_claim(n, None, "t/1") is ClaimRace.ABSENT


def test_a_claim_meets_a_changes_closure_marker() -> None:
    n = head()
    marker = {"job_id": "j", "run_id": n["next_key"], "status": "closed", "closes_epoch": 1, "closed_by": 2}
    store = store_with(n, marker)
    with pytest.raises(ConditionFailed) as lost:
        store.write([claim_head_op(n, NOW, "t/1", CFG)])
    assert after_failed_claim(n, lost.value.current, "t/1") is ClaimRace.CLOSED
    assert get(store, n["next_key"]) == marker


def test_a_claim_that_meets_a_settles_record_sends_nothing() -> None:
    # HC9 from the claimer's side: the settle of the overdue head won its successor key.
    n = head()
    missed = {"job_id": "j", "run_id": n["next_key"], "status": "missed", "scheduled_at": T0 + 5 * MINUTE}
    settled_head = head(T0 + 5 * MINUTE, after_run_id="j@earlier#1", claimed_at=NOW)
    for found in (missed, settled_head):
        assert after_failed_claim(n, found, "t/1") is ClaimRace.SETTLED


def test_the_last_claim_of_a_one_time_job_puts_its_end_marker() -> None:
    once = job(schedule="at(2026-12-05T00:00:00)")
    n = head(the_job=once)
    assert ends_life(n)
    store = store_with(n)
    put = claim_head_op(n, NOW, "t/1", CFG)
    store.write([put])
    marker = get(store, end_run_id("j", T0, 1))
    assert marker is not None and is_end_marker(marker)
    assert marker["last_run_id"] == marker["after_run_id"] == n["run_id"] and marker["last_run_at"] == T0
    assert marker["claimed_by"] == "t/1" and "runs_claimed" not in marker  # not counted
    assert "check_at" not in marker and "expires_at" in marker  # not in due; history
    # No claim follows it: a retry meets it, and it is the retry's own.
    with pytest.raises(ConditionFailed) as lost:
        store.write([claim_head_op(n, NOW + 1, "t/1", CFG)])
    assert after_failed_claim(n, lost.value.current, "t/1") is ClaimRace.OURS


def test_max_runs_counts_on_the_head_and_the_last_claim_ends_the_life() -> None:
    limited = job(max_runs=3)
    n1 = head(the_job=limited, runs_before=1)
    store = store_with(n1)
    store.write([claim_head_op(n1, NOW, "t/1", CFG)])
    n2 = get(store, n1["next_key"])
    assert n2 is not None and n2["runs_before"] == 2 and ends_life(n2)  # its run is the third
    assert n2["next_key"] == end_run_id("j", T0 + 5 * MINUTE, 1)
    store.write([claim_head_op(n2, NOW + 5 * MINUTE, "t/1", CFG)])
    marker = get(store, n2["next_key"])
    assert marker is not None and marker["runs_claimed"] == 3 and marker["max_runs"] == 3
    assert marker["last_run_id"] == n2["run_id"]


def test_a_cron_head_is_claimed_at_its_products_next_occurrence() -> None:
    cron = job(schedule="cron(0 9 ? * MON-FRI *)", timezone="America/New_York")
    friday = T0 - 10 * 3600 * 1000  # 2026-12-04 14:00 UTC, 09:00 in New York
    n = head(friday, 4, the_job=cron)
    put = claim_head_op(n, friday - MINUTE, "t/1", CFG)
    monday = friday + 3 * 24 * 3600 * 1000
    assert put.item["run_id"] == run_id_for("j", monday, 4) == n["next_key"]


def test_a_head_whose_next_key_disagrees_with_its_timing_is_refused() -> None:
    n = {**head(), "next_key": key(T0 + 7 * MINUTE)}
    with pytest.raises(ValueError, match="next_key"):
        claim_head_op(n, NOW, "t/1", CFG)


def test_the_claimed_runs_message_carries_ns_version_and_link() -> None:
    n = {**head(after_run_id="j@earlier#1"), "version": 3, "head_version": 3}
    message = claimed_run_message(n, {"target": "noop"})
    assert message.run_id == n["run_id"] and message.version == 3
    assert message.after_run_id == "j@earlier#1" and message.kind == "scheduled"
    assert message.scheduled_at == T0 and message.attempt == 1
    assert message.definition == {"target": "noop"}
    with pytest.raises(ValueError, match="not an occurrence"):
        claimed_run_message({**n, "run_id": "j@manual:r"}, {})
