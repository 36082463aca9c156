"""The redate of a late stream record when the job has a head (HC4; core/transitions/head_redate.py),
on the in-memory store: the records behind the head in its epoch, the head relinked behind them,
the state dated; and what the write refuses or loses to."""

from __future__ import annotations

from typing import Any

import pytest
from head_world import (
    EPOCH,
    MINUTE,
    T0,
    claim,
    get,
    record,
    seed,
    snapshot,
    state_item,
    without,
    world,
    write,
)
from jobsched.core.run import RunStatus, run_id_for
from jobsched.core.transitions.conditions import _relink_successor_absent, _run_is_new, _state_unchanged
from jobsched.core.transitions.head_adhoc import adhoc_ops
from jobsched.core.transitions.head_redate import (
    REDATE_CHUNK_RECORDS,
    redate_records,
    redate_with_head_ops,
    redate_without_head_ops,
)
from jobsched.core.transitions.register import REDATE_FLOOR
from jobsched.core.writes import STATE, Check, Put, Update, failing_parts
from jobsched_tools.fakes.memory_store import MemoryStore

NOW = T0 - MINUTE
DATED = T0 - 20 * MINUTE  # the change's date, from its late stream record
FLOOR = T0 - 3 * MINUTE  # the date the reconcile pass gave it


def dated_state(**changes: Any) -> dict[str, Any]:
    return state_item(changed_at=FLOOR, **{REDATE_FLOOR: T0 - 30 * MINUTE}, **changes)


def late_records() -> list[dict[str, Any]]:
    """The occurrences between the change's date and the pass's, oldest first: two run late, one
    is missed (its grace passed)."""
    return [
        record(T0 - 15 * MINUTE, EPOCH, RunStatus.MISSED),
        record(T0 - 10 * MINUTE, EPOCH, RunStatus.PENDING),
        record(T0 - 5 * MINUTE, EPOCH, RunStatus.PENDING),
    ]


def test_a_redate_puts_its_records_behind_the_head_and_relinks_it() -> None:
    store, head = world(through=T0 - 30 * MINUTE)
    seed_state(store, dated_state())
    records = late_records()
    ops = redate_with_head_ops(dated_state(), head, records, DATED, T0 - 5 * MINUTE, NOW)
    assert len(ops) == 1 + len(records) + 2
    assert isinstance(ops[0], Update) and ops[0].table == STATE
    assert isinstance(ops[-2], Update) and isinstance(ops[-1], Check)
    assert write(store, ops) is None
    missed, first, second = (get(store, r["run_id"]) for r in records)
    relinked = get(store, head["run_id"])
    assert missed and first and second and relinked
    assert "after_run_id" not in missed  # a missed record holds no turn
    assert first["after_run_id"] == "j@prev" and second["after_run_id"] == first["run_id"]
    assert relinked["after_run_id"] == second["run_id"] and relinked["version"] == 2
    assert relinked["through"] == T0 - 5 * MINUTE  # the records are decided occurrences now
    assert "after_run_id" not in records[1]  # the caller's records are copied, not linked in place
    state = store.get(STATE, {"job_id": "j"})
    assert state is not None
    assert state["changed_at"] == DATED and REDATE_FLOOR not in state and state["version"] == EPOCH + 1


def seed_state(store: Any, state: dict[str, Any]) -> None:
    store.tables[STATE]["j"] = dict(state)


def test_an_earlier_chunk_moves_the_floor_and_a_chunk_of_missed_records_leaves_the_head() -> None:
    """No run joins the chain: the head is not relinked (a write that moved only its token would
    read as a redispatch, ``head_invariants.redispatched``)."""
    store, head = world()
    seed_state(store, dated_state())
    missed = [record(T0 - 15 * MINUTE, EPOCH, RunStatus.MISSED)]
    assert (
        write(store, redate_with_head_ops(dated_state(), head, missed, None, T0 - 15 * MINUTE, NOW)) is None
    )
    state, relinked = store.get(STATE, {"job_id": "j"}), get(store, head["run_id"])
    assert state and relinked
    assert state[REDATE_FLOOR] == T0 - 15 * MINUTE and state["changed_at"] == FLOOR
    assert relinked == head


def test_an_instant_holding_a_live_record_of_an_older_epoch_gets_none() -> None:
    """The old timing ran 00:50 before the change was applied (epoch 1, or a legacy id); a pause's
    cancelled head and its marker (epoch 1) at 00:45 and 00:55 are no records."""
    records = late_records()
    read = [
        record(T0 - 10 * MINUTE, 1, RunStatus.SUCCEEDED),
        record(T0 - 15 * MINUTE, 1, RunStatus.MISSED, status="cancelled"),
        {"job_id": "j", "run_id": run_id_for("j", T0 - 5 * MINUTE, 1), "status": "closed"},
    ]
    kept = redate_records(records, read)
    assert [r["run_id"] for r in kept] == [records[0]["run_id"], records[2]["run_id"]]
    legacy = [record(T0 - 5 * MINUTE, None, RunStatus.SUCCEEDED)]
    assert [r["run_id"] for r in redate_records(records, legacy)] == [r["run_id"] for r in records[:2]]


def test_a_redates_records_lie_before_the_head_in_its_epoch() -> None:
    _, head = world()
    with pytest.raises(ValueError, match="takes the head's epoch"):
        redate_with_head_ops(
            dated_state(), head, [record(T0 - 5 * MINUTE, 1, RunStatus.PENDING)], DATED, T0, NOW
        )
    with pytest.raises(ValueError, match="lie before the head"):
        redate_with_head_ops(dated_state(), head, [record(T0, EPOCH, RunStatus.PENDING)], DATED, T0, NOW)


def test_a_full_chunk_is_a_transaction_of_a_hundred_items() -> None:
    store, head = world(head_at=T0 + 1000 * MINUTE)
    seed_state(store, dated_state())
    chunk = [record(T0 - (i + 1) * 5 * MINUTE, EPOCH, RunStatus.PENDING) for i in range(REDATE_CHUNK_RECORDS)]
    chunk.reverse()
    ops = redate_with_head_ops(dated_state(), head, chunk, DATED, T0 - 5 * MINUTE, NOW)
    assert len(ops) == 100 == REDATE_CHUNK_RECORDS + 3
    assert write(store, ops) is None  # the store refuses more than 100
    extra = [record(T0 - 1000 * MINUTE, EPOCH, RunStatus.MISSED), *chunk]
    with pytest.raises(ValueError, match="at most 97 records"):
        redate_with_head_ops(dated_state(), head, extra, DATED, T0 - 5 * MINUTE, NOW)


def test_a_claim_since_the_read_fails_the_redate_which_reads_the_head_again() -> None:
    store, head = world()
    seed_state(store, dated_state())
    ops = redate_with_head_ops(dated_state(), head, late_records(), DATED, T0 - 5 * MINUTE, NOW)
    claim(store, head)
    before = snapshot(store)
    lost = write(store, ops)
    assert lost is not None and lost.op is ops[-1]
    assert failing_parts(lost.op.condition, lost.current) == [_relink_successor_absent("redate")]
    assert snapshot(store) == before


def test_a_record_made_since_the_read_fails_the_redate() -> None:
    """A backfill of 00:50 in the head's epoch landed after the read (its relink moved the head's
    version too; here the record alone stands, as when the head's read came after it)."""
    store, head = world()
    seed_state(store, dated_state())
    records = late_records()
    seed(store, {**records[1], "kind": "backfill", "status": "running"})
    ops = redate_with_head_ops(dated_state(), head, records, DATED, T0 - 5 * MINUTE, NOW)
    lost = write(store, ops)
    assert lost is not None and lost.op is ops[2]
    assert failing_parts(lost.op.condition, lost.current) == [_run_is_new()]
    assert write(store, without(ops, _run_is_new())) is None  # the mutant replaces the running run
    replaced = get(store, records[1]["run_id"])
    assert replaced is not None and replaced["status"] == "pending"


def test_without_the_successor_check_the_records_are_linked_ahead_of_a_claimed_run() -> None:
    store, head = world()
    seed_state(store, dated_state())
    ops = redate_with_head_ops(dated_state(), head, late_records(), DATED, T0 - 5 * MINUTE, NOW)
    claim(store, head)
    assert write(store, without(ops, _relink_successor_absent("redate"))) is None
    relinked = get(store, head["run_id"])
    assert relinked is not None and relinked["after_run_id"] == late_records()[2]["run_id"]
    assert get(store, str(head["next_key"])) is not None  # relinked although claimed
    assert isinstance(ops[1], Put)


def test_the_redates_state_part_holds_the_state_as_read() -> None:
    """``_state_unchanged`` alone, on the op: every write that moves a state with a head (a change,
    another redate chunk) also moves the head's version or puts the same records, so on the store
    the relink's parts stop those first (the part is caught only with partners, as the model's
    ``adhoc.head_scheduled``); the state part keeps the floor and the date as read."""
    _, head = world()
    state = dated_state()
    update = redate_with_head_ops(state, head, late_records(), DATED, T0 - 5 * MINUTE, NOW)[0]
    assert failing_parts(update.condition, state) == []
    moved = {**state, "version": state["version"] + 1, REDATE_FLOOR: T0 - 10 * MINUTE}
    assert failing_parts(update.condition, moved) == [_state_unchanged(state)]


def test_a_headless_redates_record_key_is_written_only_with_the_states_version() -> None:
    """``redate_without_head_ops:_run_is_new`` is redundant with its ``_state_unchanged`` (docs/
    promises.md, w9): a job without a head (finished) keeps its chain's end on the state, so every
    writer of a record at a past instant in the state's epoch (the same record delivered again, a
    backfill: ``adhoc_ops`` joins the state's chain, ``_join_chain``) moves the state's version in
    the same write, and the state part fails the redate first. Switched off together, the redate's
    put replaces the backfill's run (explorer ``redate-headless-twice``: ``record_overwritten``)."""
    store = MemoryStore()
    state = state_item(status="finished", changed_at=FLOOR, **{REDATE_FLOOR: T0 - 30 * MINUTE})
    seed_state(store, state)
    late = record(T0 - 5 * MINUTE, EPOCH, RunStatus.PENDING)
    assert write(store, adhoc_ops({**late, "kind": "backfill"}, state, None)) is None
    moved = store.get(STATE, {"job_id": "j"})
    assert moved is not None and moved["version"] == state["version"] + 1
    ops = redate_without_head_ops(state, [late], DATED, T0 - 5 * MINUTE, NOW)
    lost = write(store, without(ops, _run_is_new()))
    assert lost is not None and lost.op_index == 0  # the state part, not the put
    assert failing_parts(lost.op.condition, lost.current) == [_state_unchanged(state)]
    assert write(store, without(without(ops, _run_is_new()), _state_unchanged(state))) is None
    replaced = get(store, late["run_id"])
    assert replaced is not None and replaced["kind"] != "backfill"  # the mutant pair overwrites it
