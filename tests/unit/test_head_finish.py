"""The finish write and the rule every reader applies (HC5; core/transitions/head_finish.py), on
the in-memory store: the end marker's count and last run copied to the state, and the two races
its condition parts stop."""

from __future__ import annotations

from typing import Any

import pytest
from head_world import (
    CFG,
    EPOCH,
    JOB,
    MINUTE,
    T0,
    definition,
    get,
    seed,
    snapshot,
    state_item,
    without,
    world,
    write,
)
from jobsched.core.head import HeadJob, head_check_delay_ms, head_item
from jobsched.core.run import end_run_id, run_id_for, run_key
from jobsched.core.transitions.conditions import _end_marker_written, _state_as_read
from jobsched.core.transitions.head_claim import claim_head_op
from jobsched.core.transitions.head_finish import (
    FINISH_ITEMS,
    ends_live_life,
    finish_life_ops,
    reads_as_finished,
    status_as_read,
)
from jobsched.core.writes import RUNS, STATE, Check, Put, Update, failing_parts

NOW = T0 + MINUTE


def end_marker(**changes: Any) -> dict[str, Any]:
    """The end marker the claim of a ``max_runs`` life's last head puts at its ``next_key``
    (``head_claim.end_marker_item``): the life's count, the last run's id and instant."""
    last = head_item(
        HeadJob.of_definition(definition(max_runs=3)),
        T0,
        EPOCH,
        through=T0 - 5 * MINUTE,
        shard_count=CFG.shard_count,
        check_delay_ms=head_check_delay_ms(CFG),
        runs_before=2,
        after_run_id="j@before-last",
    )
    item = dict(claim_head_op(last, T0 - MINUTE, "t/1", CFG).item)
    assert item["status"] == "end" and item["run_id"] == end_run_id("j", T0, EPOCH)
    item.update(changes)
    return item


def test_the_finish_write_copies_the_end_marker_to_the_state() -> None:
    store, _ = world()
    marker = end_marker()
    seed(store, marker)
    state = state_item(runs_claimed=0, through=T0 - 5 * MINUTE)
    ops = finish_life_ops(state, marker, NOW)
    assert len(ops) == FINISH_ITEMS == 2
    update, check = ops
    assert isinstance(update, Update) and update.table == STATE
    assert isinstance(check, Check) and check.key == run_key(marker["run_id"])
    assert write(store, ops) is None
    finished = store.get(STATE, {"job_id": "j"})
    assert finished is not None
    assert finished["status"] == "finished" and finished["version"] == EPOCH + 1
    assert finished["runs_claimed"] == 3 and finished["latest_run_id"] == run_id_for("j", T0, EPOCH)
    assert finished["through"] == T0 and finished["epoch"] == EPOCH  # the life's epoch stays


def test_a_reader_takes_active_without_a_head_but_with_an_end_marker_as_finished() -> None:
    _, head = world()
    marker = end_marker()
    closed = {**marker, "status": "closed"}
    active, finished = state_item(), state_item(status="finished")
    assert reads_as_finished(active, None, marker)
    assert status_as_read(active, None, marker) == "finished"
    assert not reads_as_finished(active, head, marker)  # a new life's head (a raise of max_runs)
    assert not reads_as_finished(active, None, None)
    assert not reads_as_finished(active, None, closed)  # a settle or a change filled the end key
    assert not reads_as_finished(state_item(status="paused"), None, marker)
    assert status_as_read(state_item(status="paused"), None, marker) == "paused"
    assert reads_as_finished(finished, None, None)
    assert not reads_as_finished(None, None, marker)


def test_a_change_since_the_read_fails_the_finish_write() -> None:
    """The state is read (active, the life ended: no head, the end marker), then a change raises
    ``max_runs``: a new epoch, a new head, the state's version moved. The finish write built
    from the first read fails ``_state_as_read``; without it the state would read finished while
    the new life's head waits to be claimed."""
    store, _ = world()
    store.tables[RUNS].clear()  # the life's runs are history; what matters: no head, the marker
    marker = end_marker()
    seed(store, marker)
    read = state_item()
    ops = finish_life_ops(read, marker, NOW)
    new_epoch = EPOCH + 1
    new_head = head_item(
        JOB,
        T0 + 5 * MINUTE,
        new_epoch,
        through=T0,
        shard_count=CFG.shard_count,
        check_delay_ms=head_check_delay_ms(CFG),
        runs_before=3,
    )
    store.write(
        [
            Update(
                STATE, {"job_id": "j"}, (), "change", set={"version": new_epoch, "head_at": T0 + 5 * MINUTE}
            ),
            Put(RUNS, new_head, (), "change new head"),
        ]
    )
    before = snapshot(store)
    lost = write(store, ops)
    assert lost is not None and lost.op is ops[0]
    assert failing_parts(lost.op.condition, lost.current) == [_state_as_read(read)]
    assert snapshot(store) == before
    assert write(store, without(ops, _state_as_read(read))) is None  # the mutant lands
    state = store.get(STATE, {"job_id": "j"})
    assert state is not None and state["status"] == "finished" and get(store, new_head["run_id"]) is not None


def test_the_finish_write_needs_the_end_marker_written() -> None:
    """The trigger's put of the end marker got no answer, and it follows with the finish write
    built from the marker it meant to put. A settle of the overdue last head had filled the end
    key first (a closure marker: the life goes on past the missed head). The check at the key
    fails; without it the state would be finished while the life goes on."""
    store, _ = world()
    intended = end_marker()
    seed(store, {**intended, "status": "closed", "kind": None, "closes_epoch": EPOCH, "closed_by": "settle"})
    ops = finish_life_ops(state_item(), intended, NOW)
    before = snapshot(store)
    lost = write(store, ops)
    assert lost is not None and lost.op is ops[1]
    assert failing_parts(lost.op.condition, lost.current) == [_end_marker_written()]
    assert snapshot(store) == before
    # No item at the key at all (the put never landed): refused as well.
    store.tables[RUNS].pop(("j", intended["run_id"]))
    assert write(store, ops) is not None
    assert write(store, without(ops, _end_marker_written())) is None  # the mutant finishes the job
    state = store.get(STATE, {"job_id": "j"})
    assert state is not None and state["status"] == "finished"


def test_the_finish_write_refuses_what_is_not_an_active_state_and_its_end_marker() -> None:
    marker = end_marker()
    with pytest.raises(ValueError, match="only an active state"):
        finish_life_ops(state_item(status="paused"), marker, NOW)
    with pytest.raises(ValueError, match="not an end marker"):
        finish_life_ops(state_item(), {**marker, "status": "closed"}, NOW)
    with pytest.raises(ValueError, match="not an end marker"):
        finish_life_ops(state_item(), {**marker, "run_id": end_run_id("k", T0, EPOCH)}, NOW)
    with pytest.raises(ValueError, match="not an end marker"):
        finish_life_ops(state_item(), {**marker, "run_id": run_id_for("j", T0, EPOCH)}, NOW)


def test_an_end_marker_of_an_earlier_life_ends_nothing() -> None:
    """A change since the life ended (a raise of ``max_runs``: epoch 3) started another life; the
    earlier life's marker (epoch 2) says nothing of the job now, whatever a read misses."""
    marker = end_marker()
    later = state_item(version=4, epoch=3)  # a redate since raised the version alone
    assert ends_live_life(state_item(), marker) and not ends_live_life(later, marker)
    assert not reads_as_finished(later, None, marker)
    with pytest.raises(ValueError, match="not of the state's live epoch 3"):
        finish_life_ops(later, marker, NOW)
    # A state without the attribute (before the change wrote it) goes by its version.
    bare = {key: value for key, value in state_item().items() if key != "epoch"}
    assert ends_live_life(bare, marker) and not ends_live_life({**bare, "version": 3}, marker)
    assert not ends_live_life(state_item(), None) and not ends_live_life(None, marker)
