"""The legacy state's conversion to the successor claim (§5 deploy 1; core/transitions/
head_convert.py), on the in-memory store: one transaction, the state's epoch and the job's first
head; a backfill's record at the legacy key; the race with an old-code claim still in flight."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from head_world import CFG, MINUTE, SNAPSHOT, T0, definition, get, items, snapshot, without, write
from jobsched.core.head import HeadJob, ends_life, head_check_delay_ms
from jobsched.core.run import RunKind, end_run_id, run_id_for
from jobsched.core.transitions import claim_ops, new_run_item
from jobsched.core.transitions.conditions import _run_is_new, _state_unchanged
from jobsched.core.transitions.head_convert import (
    convert_legacy_ops,
    converted_head,
    head_job_of_state,
    is_legacy,
    legacy_key,
    legacy_recorded,
)
from jobsched.core.writes import RUNS, STATE, Put, Update, failing_parts
from jobsched_tools.fakes.memory_store import MemoryStore

NOW = T0 - MINUTE
VERSION = 7
LATEST = run_id_for("j", T0 - 5 * MINUTE)  # the last legacy claim's run


def legacy_state(**changes: Any) -> dict[str, Any]:
    job = HeadJob.of_definition(definition())
    item: dict[str, Any] = {
        "job_id": "j",
        "status": "active",
        "version": VERSION,
        "next_run_at": T0,
        "sched_shard": 3,
        "latest_run_id": LATEST,
        "last_scheduled_at": T0 - 5 * MINUTE,
        "runs_claimed": 3,
        "catchups": 1,
        "def_hash": job.def_hash,
        "timing": dict(job.timing),
        "misfire": dict(job.misfire),
        "registered_at": T0 - 60 * MINUTE,
    }
    item.update(changes)
    return item


def head_job(state: dict[str, Any], max_runs: int | None = None) -> HeadJob:
    return head_job_of_state(state, "skip", 3, max_runs)


def legacy_store(state: dict[str, Any]) -> MemoryStore:
    store = MemoryStore()
    store.write([Put(STATE, state, (), "seed legacy state")])
    return store


def backfilled(at: int) -> dict[str, Any]:
    return new_run_item("j", run_id_for("j", at), at, SNAPSHOT, "h", RunKind.BACKFILL, NOW, CFG)


def test_a_legacy_state_takes_its_epoch_and_the_job_its_first_head_in_one_transaction() -> None:
    state = legacy_state()
    store = legacy_store(state)
    assert is_legacy(state) and legacy_key(state) == run_id_for("j", T0)
    ops = convert_legacy_ops(
        state, head_job(state), (), CFG.shard_count, NOW, check_delay_ms=head_check_delay_ms(CFG)
    )
    assert len(ops) == 2 and isinstance(ops[0], Update) and isinstance(ops[1], Put)
    assert write(store, ops) is None
    converted = store.get(STATE, {"job_id": "j"})
    assert converted is not None and converted["version"] == VERSION + 1 and converted["head_at"] == T0
    for gone in ("next_run_at", "sched_shard", "catchups", "latest_run_id"):
        assert gone not in converted
    assert converted["runs_claimed"] == 3 and converted["through"] == T0 - 5 * MINUTE
    assert converted["epoch"] == VERSION + 1
    assert not is_legacy(converted)
    head = get(store, run_id_for("j", T0, VERSION + 1))
    assert head is not None and head == converted_head(ops)
    assert head["status"] == "scheduled" and head["epoch"] == VERSION + 1 and head["version"] == 1
    assert head["after_run_id"] == LATEST and head["runs_before"] == 3
    assert head["through"] == T0 - 5 * MINUTE and head["catchups"] == 1
    assert head["next_key"] == run_id_for("j", T0 + 5 * MINUTE, VERSION + 1)
    assert head["def_hash"] == state["def_hash"] and head["timing"] == state["timing"]


def test_a_backfills_record_at_the_legacy_key_sends_the_head_to_the_next_occurrence() -> None:
    state = legacy_state()
    store = legacy_store(state)
    record = backfilled(T0)
    store.write([Put(RUNS, record, (), "seed backfill")])
    assert (
        write(
            store,
            convert_legacy_ops(
                state, head_job(state), {T0}, CFG.shard_count, NOW, check_delay_ms=head_check_delay_ms(CFG)
            ),
        )
        is None
    )
    head = get(store, run_id_for("j", T0 + 5 * MINUTE, VERSION + 1))
    assert head is not None and head["through"] == T0 and head["after_run_id"] == LATEST
    assert get(store, run_id_for("j", T0, VERSION + 1)) is None  # one record at T0: the backfill's
    converted = store.get(STATE, {"job_id": "j"})
    assert converted is not None and converted["head_at"] == T0 + 5 * MINUTE
    assert converted["through"] == T0


def test_a_backfill_of_the_last_occurrence_finishes_the_converted_state() -> None:
    end = datetime(2026, 12, 5, 0, 2, tzinfo=UTC)  # T0 is the timing's last occurrence
    job = HeadJob.of_definition(definition(end=end))
    state = legacy_state(timing=dict(job.timing))
    store = legacy_store(state)
    ops = convert_legacy_ops(
        state, head_job(state), {T0}, CFG.shard_count, NOW, check_delay_ms=head_check_delay_ms(CFG)
    )
    assert len(ops) == 1 and converted_head(ops) is None
    assert write(store, ops) is None
    finished = store.get(STATE, {"job_id": "j"})
    assert finished is not None and finished["status"] == "finished"
    assert finished["latest_run_id"] == LATEST  # the chain's end while the job has no head
    assert finished["through"] == T0 and finished["epoch"] == VERSION + 1
    assert "next_run_at" not in finished and "catchups" not in finished
    assert not [item for item in items(store) if item["job_id"] == "j"]


def test_the_last_run_of_a_max_runs_life_heads_towards_its_end_marker() -> None:
    state = legacy_state(runs_claimed=4)
    head = converted_head(
        convert_legacy_ops(
            state,
            head_job(state, max_runs=5),
            (),
            CFG.shard_count,
            NOW,
            check_delay_ms=head_check_delay_ms(CFG),
        )
    )
    assert head is not None and ends_life(head) and head["next_key"] == end_run_id("j", T0, VERSION + 1)


def test_an_old_code_claim_in_flight_fails_the_conversion_which_reads_again() -> None:
    """The switch is on, but an old-code claim of T0 that read the state before is still in
    flight. It lands first: the conversion's version part fails, and the state it reads again
    heads the job after the claimed run. Without the part the job's head would sit at T0 beside
    the legacy run: the occurrence would run twice."""
    state = legacy_state()
    store = legacy_store(state)
    conversion = convert_legacy_ops(
        state, head_job(state), (), CFG.shard_count, NOW, check_delay_ms=head_check_delay_ms(CFG)
    )
    run = new_run_item("j", run_id_for("j", T0), T0, SNAPSHOT, "h", RunKind.SCHEDULED, NOW, CFG)
    run["after_run_id"] = LATEST
    store.write(claim_ops(state, run, T0 + 5 * MINUTE, NOW))
    before = snapshot(store)
    lost = write(store, conversion)
    assert lost is not None and lost.op is conversion[0]
    assert failing_parts(lost.op.condition, lost.current) == [_state_unchanged(state)]
    assert snapshot(store) == before
    again = store.get(STATE, {"job_id": "j"})
    assert again is not None and is_legacy(again)
    assert (
        write(
            store,
            convert_legacy_ops(
                again, head_job(again), (), CFG.shard_count, NOW, check_delay_ms=head_check_delay_ms(CFG)
            ),
        )
        is None
    )
    head = get(store, run_id_for("j", T0 + 5 * MINUTE, VERSION + 2))
    assert head is not None and head["after_run_id"] == run["run_id"] and head["through"] == T0
    # The mutant, on the first read: a second live record at T0.
    store = legacy_store(state)
    store.write(claim_ops(state, run, T0 + 5 * MINUTE, NOW))
    assert write(store, without(conversion, _state_unchanged(state))) is None
    at_t0 = [item for item in items(store) if item["scheduled_at"] == T0]
    assert len(at_t0) == 2


def test_a_second_conversion_finds_nothing_left_to_convert() -> None:
    state = legacy_state()
    store = legacy_store(state)
    ops = convert_legacy_ops(
        state, head_job(state), (), CFG.shard_count, NOW, check_delay_ms=head_check_delay_ms(CFG)
    )
    assert write(store, ops) is None
    lost = write(
        store,
        convert_legacy_ops(
            state, head_job(state), (), CFG.shard_count, NOW, check_delay_ms=head_check_delay_ms(CFG)
        ),
    )
    assert lost is not None and lost.op.label == "convert to the successor claim"
    again = store.get(STATE, {"job_id": "j"})
    assert again is not None and not is_legacy(again)
    with pytest.raises(ValueError, match="only an active state in next-run"):
        convert_legacy_ops(
            again, head_job(again), (), CFG.shard_count, NOW, check_delay_ms=head_check_delay_ms(CFG)
        )


def test_only_an_active_state_in_next_run_is_converted() -> None:
    paused = legacy_state(status="paused")
    del paused["next_run_at"]
    for state in (paused, legacy_state(status="paused"), legacy_state(next_run_at=None)):
        assert not is_legacy(state)
        with pytest.raises(ValueError, match="only an active state in next-run"):
            convert_legacy_ops(
                state,
                head_job(legacy_state()),
                (),
                CFG.shard_count,
                NOW,
                check_delay_ms=head_check_delay_ms(CFG),
            )


def test_a_state_that_never_ran_heads_through_its_registration() -> None:
    state = legacy_state()
    for name in ("last_scheduled_at", "latest_run_id", "runs_claimed", "catchups"):
        del state[name]
    head = converted_head(
        convert_legacy_ops(
            state, head_job(state), (), CFG.shard_count, NOW, check_delay_ms=head_check_delay_ms(CFG)
        )
    )
    assert head is not None and head["through"] == state["registered_at"]
    assert "after_run_id" not in head and "catchups" not in head and head["runs_before"] == 0
    ops = convert_legacy_ops(
        state, head_job(state), (), CFG.shard_count, NOW, check_delay_ms=head_check_delay_ms(CFG)
    )
    assert isinstance(ops[0], Update) and set(ops[0].remove) == {"next_run_at", "sched_shard"}


def test_the_first_heads_put_never_replaces_an_item() -> None:
    """``_run_is_new`` on the head's put, on the op: the epoch E = version + 1 is new, so on the
    store the state's version part stops any writer of that key first (as the model's
    ``change.new_head_free``, never caught alone); the put still never overwrites."""
    state = legacy_state()
    put = convert_legacy_ops(
        state, head_job(state), (), CFG.shard_count, NOW, check_delay_ms=head_check_delay_ms(CFG)
    )[1]
    assert isinstance(put, Put)
    assert failing_parts(put.condition, None) == []
    assert failing_parts(put.condition, dict(put.item)) == [_run_is_new()]


def test_an_overdue_states_backfilled_occurrences_are_all_passed() -> None:
    """An overdue legacy state (its trigger was down) whose next two occurrences a person
    backfilled: the head goes to the first occurrence with no record, after both."""
    state = legacy_state()
    store = legacy_store(state)
    for at in (T0 - 5 * MINUTE, T0, T0 + 5 * MINUTE):
        store.write([Put(RUNS, backfilled(at), (), "seed backfill")])
    manual = new_run_item("j", "j@manual:r", NOW, SNAPSHOT, "h", RunKind.MANUAL, NOW, CFG)
    recorded = legacy_recorded(state, [*items(store), manual, {"run_id": "j@not-an-instant"}])
    assert recorded == {T0, T0 + 5 * MINUTE}  # not the one before next_run_at, nor a manual run
    ops = convert_legacy_ops(
        state,
        head_job(state),
        recorded,
        CFG.shard_count,
        T0 + 7 * MINUTE,
        check_delay_ms=head_check_delay_ms(CFG),
    )
    assert write(store, ops) is None
    head = get(store, run_id_for("j", T0 + 10 * MINUTE, VERSION + 1))
    assert head is not None and head["through"] == T0 + 5 * MINUTE
    assert [item["scheduled_at"] for item in items(store)].count(T0 + 5 * MINUTE) == 1
