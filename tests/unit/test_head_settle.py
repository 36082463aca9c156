"""The settle of an overdue head (core/transitions/head_settle.py), applied to the product's in-memory
store: every misfire policy, late runs within grace, chunks within DynamoDB's 100 operations,
max_runs and one-time jobs (the end marker, the closed end key), and its races: a late claim of
the same head (HC9), a start, a relink, a repeated chunk. Each condition part has a test that
fails without it (the ``without`` cases here, and by hand on the source)."""

from __future__ import annotations

from typing import Any

import pytest
from head_items import CFG, MINUTE, SECOND, T0, get, head, job, key, store_with, without
from jobsched.core.errors import ConditionFailed
from jobsched.core.head import ends_life, is_claimed_run, is_closure_marker, is_end_marker, is_head
from jobsched.core.limits import DYNAMODB_MAX_TRANSACTION_ITEMS
from jobsched.core.run import RunStatus, end_run_id
from jobsched.core.transitions.head_claim import ClaimRace, after_failed_claim, claim_head_op
from jobsched.core.transitions.head_settle import HEAD_SETTLE_CHUNK, HeadChunk, settle_head_ops
from jobsched.core.writes import Item, Update
from jobsched_tools.fakes.memory_store import MemoryStore

LATE = T0 + 17 * MINUTE  # the detector's now: T0, +5, +10 and +15 came due unclaimed


def overdue_head(policy: str = "skip", max_catchup: int = 10, **options: Any) -> Item:
    the_job = options.pop("the_job", None) or job(misfire={"policy": policy, "max_catchup": max_catchup})
    options.setdefault("after_run_id", "j@earlier#1")
    return head(the_job=the_job, **options)


def settle(store: MemoryStore, n: Item, now: int, **options: Any) -> HeadChunk:
    chunk = settle_head_ops(n, now, CFG, **options)
    assert len(chunk.ops) <= DYNAMODB_MAX_TRANSACTION_ITEMS
    store.write(chunk.ops)
    return chunk


def status_at(store: MemoryStore, at: int) -> str | None:
    found = get(store, key(at))
    return None if found is None else str(found["status"])


def test_skip_records_every_overdue_occurrence_and_heads_the_first_after_now() -> None:
    n = overdue_head("skip")
    store = store_with(n)
    chunk = settle(store, n, LATE)
    assert [status_at(store, T0 + i * 5 * MINUTE) for i in range(4)] == ["missed"] * 4
    decided_n = get(store, n["run_id"])
    assert decided_n is not None and decided_n["version"] == 2 == decided_n["head_version"]
    assert "check_at" not in decided_n and "lease_shard" not in decided_n  # out of due
    assert decided_n["reason"] == "misfire policy skip" and "expires_at" in decided_n
    new = get(store, key(T0 + 20 * MINUTE))
    assert new is not None and is_head(new, get(store, new["next_key"]))
    assert new == chunk.next_head and not chunk.more and chunk.to_dispatch == []
    assert new["after_run_id"] == "j@earlier#1" and new["through"] == T0 + 15 * MINUTE
    assert new["catchups"] == 0 and "claimed_by" not in new
    # The chain of successor keys has no gap: N's successor is the first record, and so on.
    assert get(store, n["next_key"]) is not None
    for i in range(1, 4):
        assert get(store, key(T0 + i * 5 * MINUTE))["next_key"] == key(T0 + (i + 1) * 5 * MINUTE)  # type: ignore[index]


def test_run_once_runs_the_latest_overdue_occurrence_linked_behind_the_chain() -> None:
    n = overdue_head("run_once")
    store = store_with(n)
    chunk = settle(store, n, LATE)
    assert [status_at(store, T0 + i * 5 * MINUTE) for i in range(4)] == ["missed"] * 3 + ["scheduled"]
    run = get(store, key(T0 + 15 * MINUTE))
    assert run is not None and run["kind"] == "catchup" and run["after_run_id"] == "j@earlier#1"
    assert run["check_at"] == run["lease_expires_at"] == LATE + CFG.dispatch_lease_seconds * SECOND
    assert is_claimed_run(run, get(store, run["next_key"]))  # its successor is the next head
    assert [r["run_id"] for r in chunk.to_dispatch] == [run["run_id"]]
    assert chunk.next_head is not None and chunk.next_head["after_run_id"] == run["run_id"]
    assert chunk.next_head["catchups"] == 1


def test_run_all_keeps_n_as_a_run_and_counts_catchups() -> None:
    n = overdue_head("run_all", max_catchup=2)
    store = store_with(n)
    chunk = settle(store, n, LATE)
    kept = get(store, n["run_id"])
    assert kept is not None and kept["status"] == "scheduled" and kept["version"] == 2
    assert kept["kind"] == "catchup" and kept["check_at"] == LATE + 30 * SECOND
    second = get(store, key(T0 + 5 * MINUTE))
    assert second is not None and second["status"] == "scheduled" and second["after_run_id"] == n["run_id"]
    assert [status_at(store, T0 + i * 5 * MINUTE) for i in (2, 3)] == ["missed", "missed"]
    assert [r["run_id"] for r in chunk.to_dispatch] == [n["run_id"], second["run_id"]]
    assert chunk.to_dispatch[0]["version"] == 2  # N's message carries its new token
    assert chunk.next_head is not None and chunk.next_head["after_run_id"] == second["run_id"]
    assert chunk.next_head["catchups"] == 2


def test_occurrences_within_grace_run_late() -> None:
    n = overdue_head("skip")
    store = store_with(n)
    now = T0 + 5 * MINUTE + 10 * SECOND  # T0 is past its 60 s grace, T0 + 5 min is not
    chunk = settle(store, n, now)
    assert status_at(store, T0) == "missed"
    late = get(store, key(T0 + 5 * MINUTE))
    assert late is not None and late["status"] == "scheduled" and late["kind"] == "scheduled"
    assert late["reason"] == "late within grace" and late["after_run_id"] == "j@earlier#1"
    assert chunk.next_head is not None and chunk.next_head["scheduled_at"] == T0 + 10 * MINUTE


def settle_all(store: MemoryStore, n: Item, now: int, chunk: int) -> list[HeadChunk]:
    chunks = [settle(store, n, now, chunk=chunk)]
    while chunks[-1].more:
        assert chunks[-1].next_head is not None
        chunks.append(settle(store, chunks[-1].next_head, now, chunk=chunk))
    return chunks


def test_a_long_outage_settles_in_chunks_each_leaving_a_head() -> None:
    n = overdue_head("run_once")
    store = store_with(n)
    chunks = settle_all(store, n, T0 + 62 * MINUTE, chunk=5)  # 13 occurrences: 5 + 5 + 3
    assert len(chunks) == 3 and all(c.next_head is not None for c in chunks)  # H1 between chunks
    statuses = [status_at(store, T0 + i * 5 * MINUTE) for i in range(13)]
    # run_once: only the outage's latest runs, not the last of each chunk (more_follow).
    assert statuses == ["missed"] * 12 + ["scheduled"]
    assert [len(c.to_dispatch) for c in chunks] == [0, 0, 1]
    assert chunks[-1].next_head["scheduled_at"] == T0 + 65 * MINUTE  # type: ignore[index]


def test_a_full_chunk_stays_within_dynamodbs_transaction_limit() -> None:
    n = overdue_head("skip", the_job=job(schedule="rate(1 minute)", misfire={"policy": "skip"}))
    store = store_with(n)
    chunks = settle_all(store, n, T0 + 200 * MINUTE, chunk=HEAD_SETTLE_CHUNK)
    assert [len(c.ops) for c in chunks] == [HEAD_SETTLE_CHUNK + 1, HEAD_SETTLE_CHUNK + 1, 10]
    assert HEAD_SETTLE_CHUNK + 2 <= DYNAMODB_MAX_TRANSACTION_ITEMS  # room for a closure marker
    with pytest.raises(ValueError, match="chunk"):
        settle_head_ops(n, T0, CFG, chunk=HEAD_SETTLE_CHUNK + 1)


def test_max_runs_reached_in_a_chunk_writes_the_end_marker() -> None:
    limited = job(max_runs=3, misfire={"policy": "run_all", "max_catchup": 10})
    n = overdue_head(the_job=limited, runs_before=1)
    store = store_with(n)
    chunk = settle(store, n, LATE)
    assert chunk.next_head is None and chunk.end_marker is not None and not chunk.more
    marker = get(store, end_run_id("j", T0 + 5 * MINUTE, 1))
    assert marker is not None and is_end_marker(marker) and marker["runs_claimed"] == 3
    assert marker["after_run_id"] == key(T0 + 5 * MINUTE) == marker["last_run_id"]
    assert status_at(store, T0 + 10 * MINUTE) is None  # past the life's end: not due
    assert get(store, key(T0 + 5 * MINUTE))["next_key"] == marker["run_id"]  # type: ignore[index]


def test_a_missed_last_head_fills_its_end_key_and_the_life_goes_on() -> None:
    limited = job(max_runs=3, misfire={"policy": "skip"})
    n = overdue_head(the_job=limited, runs_before=2)
    assert ends_life(n)
    store = store_with(n)
    chunk = settle(store, n, LATE)
    closed = get(store, n["next_key"])
    assert closed is not None and is_closure_marker(closed)
    # A late claim of N now meets the marker: no end marker beside the chunk's next head.
    with pytest.raises(ConditionFailed) as lost:
        store.write([claim_head_op(n, LATE, "t/late", CFG)])
    assert after_failed_claim(n, lost.value.current, "t/late") is ClaimRace.CLOSED
    new = chunk.next_head
    assert new is not None and new["runs_before"] == 2 and ends_life(new)
    assert new["next_key"] == end_run_id("j", T0 + 20 * MINUTE, 1)


def test_a_missed_one_time_job_ends_with_its_end_marker() -> None:
    once = job(schedule="at(2026-12-05T00:00:00)", misfire={"policy": "skip"})
    n = overdue_head(the_job=once)
    store = store_with(n)
    chunk = settle(store, n, LATE)
    assert status_at(store, T0) == "missed" and chunk.next_head is None
    marker = get(store, n["next_key"])
    assert marker is not None and is_end_marker(marker) and marker["last_run_at"] == T0
    assert marker["after_run_id"] == "j@earlier#1"  # the chain's end: N did not run


def test_a_missed_one_time_job_under_run_once_runs_late() -> None:
    once = job(schedule="at(2026-12-05T00:00:00)", misfire={"policy": "run_once"})
    n = overdue_head(the_job=once)
    store = store_with(n)
    chunk = settle(store, n, LATE)
    assert status_at(store, T0) == "scheduled" and [r["run_id"] for r in chunk.to_dispatch] == [n["run_id"]]
    assert chunk.end_marker is not None and chunk.end_marker["after_run_id"] == n["run_id"]


# --- the races, one per condition part ----------------------------------------------------------


def test_hc9_a_late_claim_that_lands_first_fails_the_settle() -> None:
    n = overdue_head("skip")
    store = store_with(n)
    store.write([claim_head_op(n, LATE - 1, "t/late", CFG)])
    ops = settle_head_ops(n, LATE, CFG).ops
    with pytest.raises(ConditionFailed) as lost:
        store.write(ops)
    assert lost.value.op.condition[0].why.startswith("settle.successor_absent")
    assert get(store, n["run_id"]) == n  # N runs late as claimed
    # Without the part the settle overwrites the claim's head, and N is missed after its message.
    store.write(without(ops, "settle.successor_absent"))
    assert status_at(store, T0) == "missed"


def test_hc9_a_settle_that_lands_first_leaves_the_late_claimer_nothing_to_send() -> None:
    n = overdue_head("skip")
    store = store_with(n)
    settle(store, n, LATE)
    with pytest.raises(ConditionFailed) as lost:
        store.write([claim_head_op(n, LATE + 1, "t/late", CFG)])
    assert after_failed_claim(n, lost.value.current, "t/late") is ClaimRace.SETTLED


def test_a_head_started_since_the_read_is_not_settled() -> None:
    n = overdue_head("skip")
    store = store_with({**n, "status": "running", "version": 2})
    ops = settle_head_ops(n, LATE, CFG).ops
    # Its successor exists too once claimed; here only the head's own part stands in the way.
    with pytest.raises(ConditionFailed) as lost:
        store.write(without(ops, "settle.head_version"))
    assert lost.value.op.condition[0].why.startswith("settle.head_scheduled")
    store.write(without(ops, "settle.head_"))  # without both: a running run is marked missed
    assert status_at(store, T0) == "missed"


def test_a_head_relinked_since_the_read_is_read_again() -> None:
    n = overdue_head("run_all")
    store = store_with({**n, "version": 2, "head_version": 2, "after_run_id": "j@manual:m"})
    ops = settle_head_ops(n, LATE, CFG).ops
    with pytest.raises(ConditionFailed) as lost:
        store.write(ops)
    assert isinstance(lost.value.op, Update) and "settle.head_version" in lost.value.op.condition[1].why
    # Without it the chunk links behind the chain's end as read, beside the manual run.
    store.write(without(ops, "settle.head_version"))
    assert get(store, key(T0 + 5 * MINUTE))["after_run_id"] == n["run_id"]  # type: ignore[index]
    assert get(store, n["run_id"])["after_run_id"] == "j@manual:m"  # type: ignore[index]


def test_a_record_at_a_later_occurrence_is_never_overwritten() -> None:
    n = overdue_head("skip")
    taken = {"job_id": "j", "run_id": key(T0 + 10 * MINUTE), "status": "succeeded", "version": 3}
    store = store_with(n, taken)
    ops = settle_head_ops(n, LATE, CFG).ops
    with pytest.raises(ConditionFailed) as lost:
        store.write(ops)
    assert lost.value.op.condition[0].why.startswith("settle.missed_absent")
    store.write(without(ops, "settle.missed_absent"))
    assert status_at(store, T0 + 10 * MINUTE) == "missed"  # the run's record is lost


def test_an_existing_next_head_is_never_overwritten() -> None:
    n = overdue_head("skip")
    other = head(T0 + 20 * MINUTE, claimed_by="t/x", after_run_id="j@other#1")
    store = store_with(n, other)
    ops = settle_head_ops(n, LATE, CFG).ops
    with pytest.raises(ConditionFailed) as lost:
        store.write(ops)
    assert lost.value.op.condition[0].why.startswith("settle.next_head_absent")
    store.write(without(ops, "settle.next_head_absent"))
    assert get(store, key(T0 + 20 * MINUTE))["after_run_id"] == "j@earlier#1"  # type: ignore[index]


def test_a_repeated_chunk_writes_nothing() -> None:
    n = overdue_head("run_once")
    store = store_with(n)
    settle(store, n, LATE)
    before = {at: get(store, key(at)) for at in range(T0, T0 + 25 * MINUTE, 5 * MINUTE)}
    with pytest.raises(ConditionFailed):
        store.write(settle_head_ops(n, LATE + 1, CFG).ops)
    assert {at: get(store, key(at)) for at in before} == before
    assert RunStatus.MISSED.value == status_at(store, T0)


def test_a_head_whose_successor_key_the_chunk_would_not_fill_is_refused() -> None:
    n = {**overdue_head("skip"), "next_key": key(T0 + 7 * MINUTE)}
    with pytest.raises(ValueError, match="next_key"):
        settle_head_ops(n, T0 + 2 * MINUTE, CFG)


# --- the registrar's settle before a change (SettleFirst): a stop's reason, the change's time -----


def test_a_stop_reason_records_every_due_occurrence_missed_with_it() -> None:
    n = overdue_head("run_all")
    store = store_with(n)
    chunk = settle(store, n, LATE, reason="job paused before it ran")
    assert [status_at(store, T0 + i * 5 * MINUTE) for i in range(4)] == ["missed"] * 4
    assert {r["reason"] for r in chunk.decided} == {"job paused before it ran"}
    assert {r["kind"] for r in chunk.decided} == {"catchup"}  # as today's settle records them
    assert chunk.to_dispatch == [] and chunk.next_head is not None
    assert chunk.next_head["catchups"] == 0 and chunk.next_head["scheduled_at"] == T0 + 20 * MINUTE


def test_until_bounds_the_occurrences_settled_at_the_changes_time() -> None:
    n = overdue_head("skip")
    store = store_with(n)
    chunk = settle(store, n, LATE, until=T0 + 6 * MINUTE)  # the change was made at T0 + 6 min
    assert [status_at(store, T0 + i * 5 * MINUTE) for i in range(2)] == ["missed", "missed"]
    assert chunk.next_head is not None and chunk.next_head["scheduled_at"] == T0 + 10 * MINUTE
    assert not chunk.more and is_head(chunk.next_head, get(store, chunk.next_head["next_key"]))


def test_until_bounds_the_chunks_too() -> None:
    n = overdue_head("skip")
    chunk = settle_head_ops(n, LATE, CFG, chunk=2, until=T0 + 6 * MINUTE)
    assert chunk.next_head is not None and chunk.next_head["scheduled_at"] == T0 + 10 * MINUTE
    assert not chunk.more  # T0 + 10 min is after the change: the change closes it, not a settle
    assert settle_head_ops(n, LATE, CFG, chunk=1, until=T0 + 6 * MINUTE).more
