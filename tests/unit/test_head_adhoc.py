"""The runs that join the chain through the head (core/transitions/head_adhoc.py): the ad-hoc run,
the rerun of a missed record and the backfill (HC3, HC11), applied to the in-memory store against
the racers the build plan names. Each new condition part has a test that fails without it: the
test stages the race, and a mutant (the ops with the part removed, ``without``) shows the damage
the part stops."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator

import pytest
from head_world import (
    CFG,
    EPOCH,
    JOB,
    MINUTE,
    SNAPSHOT,
    T0,
    claim,
    close,
    definition,
    find_head,
    get,
    items,
    manual_run,
    record,
    seed,
    snapshot,
    state_item,
    without,
    world,
    write,
)
from jobsched.core.head import HeadJob, head_check_delay_ms, head_item
from jobsched.core.run import RunStatus, end_run_id, run_id_for, shard_of
from jobsched.core.transitions.conditions import (
    _adhoc_run_absent,
    _backfill_record_absent,
    _head_scheduled,
    _head_version,
    _relink_successor_absent,
)
from jobsched.core.transitions.head_adhoc import (
    NOT_SETTLED,
    RELINK_ITEMS,
    BackfillRefused,
    JoinRetry,
    NoHeadRead,
    adhoc_ops,
    after_join_failure,
    backfill_run_id,
    backfill_step,
    backfill_with_head_ops,
    in_epoch,
    relink_head_ops,
    rerun_ops,
    rerunnable,
)
from jobsched.core.transitions.head_claim import claim_head_op
from jobsched.core.transitions.head_finish import finish_life_ops, reads_as_finished
from jobsched.core.writes import RUNS, STATE, Check, Put, Update, failing_parts
from jobsched_tools.fakes.memory_store import MemoryStore

NOW = T0 - MINUTE  # the head is a minute ahead


def adhoc_behind_claimed(store_items: list[dict[str, object]], relinked: str) -> bool:
    """The model's ``adhoc_behind_claimed``: a run was linked ahead of a run already claimed (the
    relinked item's successor exists)."""
    keys = {str(item["run_id"]) for item in store_items}
    head = next(item for item in store_items if item["run_id"] == relinked)
    return str(head["next_key"]) in keys


# --- the ad-hoc run with a head ------------------------------------------------------------------


def test_an_ad_hoc_run_relinks_the_head_in_one_transaction_of_three_items() -> None:
    store, head = world()
    ops = adhoc_ops(manual_run(), state_item(), head)
    assert len(ops) == RELINK_ITEMS == 3
    put, relink, check = ops
    assert isinstance(put, Put) and isinstance(relink, Update) and isinstance(check, Check)
    assert check.key == {"job_id": "j", "run_id": head["next_key"]}
    assert write(store, ops) is None
    made, relinked = get(store, "j@manual:r1"), get(store, head["run_id"])
    assert made is not None and relinked is not None
    assert made["after_run_id"] == "j@prev" and made["status"] == "pending"  # where the head was
    assert relinked["after_run_id"] == "j@manual:r1"  # the head now waits for M
    assert relinked["version"] == relinked["head_version"] == 2  # a stale message fails its start
    assert relinked["status"] == "scheduled" and relinked["check_at"] == head["check_at"]
    # The state is not written: the chain's end is on the head.
    assert store.get(STATE, {"job_id": "j"}) == state_item()


def test_tick_manual_a_claim_landing_before_the_relink_puts_the_run_between_n_and_n1() -> None:
    """HC3's reverse race (the model's ``tick-manual``): the claim of N lands between the ad-hoc
    run's read and its write. The check at N's successor fails; the run reads again and relinks
    N+1, so M lies between N and N+1."""
    store, n = world()
    ops = adhoc_ops(manual_run(), state_item(), n)
    n1 = claim(store, n)
    before = snapshot(store)
    lost = write(store, ops)
    assert lost is not None and lost.op is ops[2]
    assert failing_parts(lost.op.condition, lost.current) == [_relink_successor_absent("adhoc")]
    assert after_join_failure(ops, lost.op) is JoinRetry.READ_AGAIN
    assert snapshot(store) == before  # nothing written
    head = find_head(store)
    assert head["run_id"] == n1["run_id"]
    assert write(store, adhoc_ops(manual_run(), state_item(), head)) is None
    made, claimed, successor = get(store, "j@manual:r1"), get(store, n["run_id"]), get(store, n1["run_id"])
    assert made and claimed and successor
    assert made["after_run_id"] == n["run_id"] and successor["after_run_id"] == "j@manual:r1"
    assert claimed["version"] == 1 and claimed["after_run_id"] == "j@prev"  # N runs as claimed
    assert not adhoc_behind_claimed(items(store), n1["run_id"])


def test_without_the_successor_check_the_run_is_linked_ahead_of_a_claimed_run() -> None:
    store, n = world()
    ops = adhoc_ops(manual_run(), state_item(), n)
    claim(store, n)
    assert write(store, without(ops, _relink_successor_absent("adhoc"))) is None  # the mutant lands
    assert adhoc_behind_claimed(items(store), n["run_id"])


def test_a_retried_request_is_made_once() -> None:
    """The first try landed and its answer was lost; the request comes again (same request id),
    reads the head again and fails on the run's own item: made already."""
    store, head = world()
    assert write(store, adhoc_ops(manual_run(), state_item(), head)) is None
    again = adhoc_ops(manual_run(), state_item(), find_head(store))
    before = snapshot(store)
    lost = write(store, again)
    assert lost is not None and lost.op is again[0]
    assert after_join_failure(again, lost.op) is JoinRetry.MADE
    assert snapshot(store) == before
    # Without adhoc.run_absent the retry re-puts M behind itself (the model's manual-lost-response).
    assert write(store, without(again, _adhoc_run_absent())) is None
    made = get(store, "j@manual:r1")
    assert made is not None and made["after_run_id"] == "j@manual:r1"


def test_two_ad_hoc_runs_relinking_one_head_chain_one_behind_the_other() -> None:
    """The model's ``manual-manual``: both read the head; the second fails its version part,
    reads again, and joins behind the first."""
    store, head = world()
    first = adhoc_ops(manual_run("a"), state_item(), head)
    second = adhoc_ops(manual_run("b"), state_item(), head)
    assert write(store, first) is None
    lost = write(store, second)
    assert lost is not None and lost.op is second[1]
    assert failing_parts(lost.op.condition, lost.current) == [_head_version("adhoc", head["version"])]
    assert after_join_failure(second, lost.op) is JoinRetry.READ_AGAIN
    assert write(store, adhoc_ops(manual_run("b"), state_item(), find_head(store))) is None
    b, relinked = get(store, "j@manual:b"), get(store, head["run_id"])
    assert b and relinked and b["after_run_id"] == "j@manual:a" and relinked["after_run_id"] == "j@manual:b"


def test_without_the_head_version_two_ad_hoc_runs_both_follow_the_old_end() -> None:
    store, head = world()
    first = adhoc_ops(manual_run("a"), state_item(), head)
    second = adhoc_ops(manual_run("b"), state_item(), head)
    assert write(store, first) is None
    assert write(store, without(second, _head_version("adhoc", head["version"]))) is None  # the mutant lands
    a, b = get(store, "j@manual:a"), get(store, "j@manual:b")
    assert a and b and a["after_run_id"] == b["after_run_id"] == "j@prev"  # they may overlap


def test_a_settled_or_closed_head_is_read_again() -> None:
    for status in ("missed", "cancelled"):
        store, head = world()
        ops = adhoc_ops(manual_run(), state_item(), head)
        close(store, head, status)
        lost = write(store, ops)
        assert lost is not None and lost.op is ops[1]
        assert after_join_failure(ops, lost.op) is JoinRetry.READ_AGAIN


def test_the_relink_holds_only_on_a_scheduled_head() -> None:
    """``adhoc.head_scheduled`` alone: an item at the version read that is no longer an unstarted
    head. No write moves a head's status without its token, so in the model this part is caught
    only with its partners (the version and the successor check); here, alone, on the op."""
    _, head = world()
    relink = relink_head_ops(head, "j@manual:x", "adhoc")[0]
    assert failing_parts(relink.condition, head) == []
    for status in ("running", "missed", "cancelled", "pending"):
        assert failing_parts(relink.condition, {**head, "status": status}) == [_head_scheduled("adhoc")]


def test_an_ad_hoc_run_without_a_head_joins_the_states_chain_end() -> None:
    # A paused job: the change that paused it wrote the closed head's after_run_id to the state.
    paused = state_item(status="paused", latest_run_id="j@chain", version=5)
    ops = adhoc_ops(manual_run(), paused, None)
    assert len(ops) == 2
    put, join = ops
    assert isinstance(put, Put) and put.item["after_run_id"] == "j@chain"
    assert isinstance(join, Update) and join.set["latest_run_id"] == "j@manual:r1"
    assert join.set["version"] == 6
    # A legacy state (not converted: still in next-run) joins as today.
    legacy = state_item(next_run_at=T0, latest_run_id="j@legacy")
    put, _ = adhoc_ops(manual_run(), legacy, None)
    assert isinstance(put, Put) and put.item["after_run_id"] == "j@legacy"
    # No state item: no chain.
    assert [op.label for op in adhoc_ops(manual_run(), None, None)] == ["create ad-hoc run"]


def test_an_active_converted_state_read_without_a_head_is_read_again() -> None:
    with pytest.raises(NoHeadRead, match="finish write first"):
        adhoc_ops(manual_run(), state_item(latest_run_id="j@stale"), None)


def test_after_join_failure_knows_only_its_own_operations() -> None:
    _, head = world()
    ops = adhoc_ops(manual_run(), state_item(), head)
    other = adhoc_ops(manual_run(), state_item(), head)
    with pytest.raises(ValueError, match="not an operation"):
        after_join_failure(ops, other[0])
    redate = [Update(STATE, {"job_id": "j"}, (), "redate"), *ops[1:]]
    with pytest.raises(ValueError, match="first item is its run"):
        after_join_failure(redate, redate[0])


# --- the rerun of a missed record -----------------------------------------------------------------


def test_a_missed_record_is_rerun_in_place_and_joins_through_the_head() -> None:
    store, head = world()
    missed = record(T0 - 10 * MINUTE, EPOCH, RunStatus.MISSED, after_run_id="j@older")
    seed(store, missed)
    ops = rerun_ops(missed, SNAPSHOT, JOB.def_hash, NOW, CFG, state_item(), head)
    assert len(ops) == RELINK_ITEMS
    assert write(store, ops) is None
    rerun, relinked = get(store, missed["run_id"]), get(store, head["run_id"])
    assert rerun and relinked
    assert rerun["status"] == "pending" and rerun["kind"] == "backfill" and rerun["version"] == 2
    assert rerun["after_run_id"] == "j@prev" and relinked["after_run_id"] == missed["run_id"]


def test_a_first_runs_rerun_drops_its_stale_link() -> None:
    store, head = world(after=None)
    missed = record(T0 - 10 * MINUTE, EPOCH, RunStatus.MISSED, after_run_id="j@expired")
    seed(store, missed)
    assert write(store, rerun_ops(missed, SNAPSHOT, JOB.def_hash, NOW, CFG, state_item(), head)) is None
    rerun = get(store, missed["run_id"])
    assert rerun is not None and "after_run_id" not in rerun


def test_a_cancelled_head_or_a_marker_is_never_rerun() -> None:
    _, head = world()
    cancelled_head = record(T0 - 10 * MINUTE, 1, RunStatus.MISSED, status="cancelled")
    closed = {"job_id": "j", "run_id": run_id_for("j", T0 - 10 * MINUTE, 1), "status": "closed", "version": 1}
    legacy_cancelled = record(T0 - 10 * MINUTE, None, RunStatus.MISSED, status="cancelled")
    assert not rerunnable(cancelled_head) and not rerunnable(closed) and rerunnable(legacy_cancelled)
    for refused in (cancelled_head, closed):
        with pytest.raises(ValueError, match="only a missed record is rerun"):
            rerun_ops(refused, SNAPSHOT, JOB.def_hash, NOW, CFG, state_item(), head)
        with pytest.raises(ValueError, match="only a missed record is rerun"):
            rerun_ops(refused, SNAPSHOT, JOB.def_hash, NOW, CFG, state_item(status="paused"), None)
    assert len(rerun_ops(legacy_cancelled, SNAPSHOT, JOB.def_hash, NOW, CFG, state_item(), head)) == 3


def test_a_record_at_or_after_the_head_is_not_rerun() -> None:
    _, head = world()
    for at in (T0, T0 + 5 * MINUTE):
        with pytest.raises(BackfillRefused, match=NOT_SETTLED):
            rerun_ops(record(at, 1, RunStatus.MISSED), SNAPSHOT, JOB.def_hash, NOW, CFG, state_item(), head)


def test_two_reruns_of_one_record_run_it_once() -> None:
    store, head = world()
    missed = record(T0 - 10 * MINUTE, EPOCH, RunStatus.MISSED)
    seed(store, missed)
    first = rerun_ops(missed, SNAPSHOT, JOB.def_hash, NOW, CFG, state_item(), head)
    second = rerun_ops(missed, SNAPSHOT, JOB.def_hash, NOW, CFG, state_item(), head)
    assert write(store, first) is None
    lost = write(store, second)
    assert lost is not None and lost.op is second[0]  # the record is a run now: made already
    assert after_join_failure(second, lost.op) is JoinRetry.MADE


def test_a_rerun_without_a_head_joins_the_states_chain_end() -> None:
    missed = record(T0 - 10 * MINUTE, EPOCH, RunStatus.MISSED)
    paused = state_item(status="paused", latest_run_id="j@chain")
    rerun, join = rerun_ops(missed, SNAPSHOT, JOB.def_hash, NOW, CFG, paused, None)
    assert isinstance(rerun, Update) and rerun.set["after_run_id"] == "j@chain"
    assert isinstance(join, Update) and join.table == STATE
    with pytest.raises(NoHeadRead):
        rerun_ops(missed, SNAPSHOT, JOB.def_hash, NOW, CFG, state_item(), None)


# --- backfill (HC11) --------------------------------------------------------------------------------


@pytest.mark.parametrize("at", [T0, T0 + 5 * MINUTE])
def test_a_backfill_at_or_after_the_head_is_refused_and_writes_nothing(at: int) -> None:
    """HC11: the head (here overdue: now is after it) is not decided yet; the detector settles it."""
    store, head = world()
    before = snapshot(store)
    with pytest.raises(BackfillRefused, match=NOT_SETTLED):
        backfill_step(head, items(store), at, T0 + 10 * MINUTE)
    run = record(at, EPOCH, RunStatus.PENDING, kind="backfill")
    with pytest.raises(BackfillRefused, match=NOT_SETTLED):
        backfill_with_head_ops(run, head)
    assert snapshot(store) == before
    assert "detector settles it within a minute; backfill it then" in NOT_SETTLED


def test_a_backfill_of_the_future_is_refused() -> None:
    _, head = world(head_at=T0 + 60 * MINUTE)
    with pytest.raises(BackfillRefused, match="in the future"):
        backfill_step(head, [], T0 + 5 * MINUTE, T0)


def test_what_a_backfill_does_at_an_instant_of_any_epoch() -> None:
    _, head = world()
    at = T0 - 10 * MINUTE
    assert backfill_step(head, [], at, NOW).outcome == "create"
    # A live record of an older epoch (or a legacy id) decides the instant: ran, or rerun.
    for epoch in (None, 1):
        ran = record(at, epoch, RunStatus.SUCCEEDED)
        assert backfill_step(head, [ran], at, NOW).outcome == "ran"
        missed = record(at, epoch, RunStatus.MISSED)
        step = backfill_step(head, [missed], at, NOW)
        assert step.outcome == "rerun" and step.record == missed
    # A cancelled head or a closure marker of an older epoch is not a record.
    cancelled_head = record(at, 1, RunStatus.MISSED, status="cancelled")
    marker = {"job_id": "j", "run_id": run_id_for("j", at, 1), "status": "closed"}
    assert backfill_step(head, [cancelled_head, marker], at, NOW).outcome == "create"
    # A claimed run at the instant (overdue, not started yet) ran, as far as a backfill is concerned.
    claimed = record(at, 1, RunStatus.PENDING, status="scheduled", kind="scheduled")
    assert backfill_step(head, [claimed, cancelled_head], at, NOW).outcome == "ran"
    # Items of other instants, manual runs and end markers are ignored.
    others = [
        record(at - 5 * MINUTE, 1, RunStatus.SUCCEEDED),
        manual_run(),
        {"job_id": "j", "run_id": end_run_id("j", at, 1), "status": "end"},
    ]
    assert backfill_step(head, others, at, NOW).outcome == "create"


def test_a_backfills_record_takes_the_heads_epoch_and_joins_through_it() -> None:
    store, head = world()
    at = T0 - 10 * MINUTE
    assert backfill_run_id(head, at) == run_id_for("j", at, EPOCH)
    run = record(at, EPOCH, RunStatus.PENDING, kind="backfill")
    ops = backfill_with_head_ops(run, head)
    assert len(ops) == RELINK_ITEMS
    assert write(store, ops) is None
    made, relinked = get(store, run["run_id"]), get(store, head["run_id"])
    assert (
        made and relinked and made["after_run_id"] == "j@prev" and relinked["after_run_id"] == run["run_id"]
    )
    with pytest.raises(ValueError, match="takes the head's epoch"):
        backfill_with_head_ops(record(at, None, RunStatus.PENDING, kind="backfill"), head)


def test_a_backfill_racing_another_of_the_same_instant_is_made_once() -> None:
    """The job's items are read before a racing backfill of the instant lands, the head after it
    (a Query is no snapshot): the record's own part is all that stops the second put."""
    store, head = world()
    at = T0 - 10 * MINUTE
    seen = items(store)
    assert (
        write(store, backfill_with_head_ops(record(at, EPOCH, RunStatus.PENDING, kind="backfill"), head))
        is None
    )
    started = {**(get(store, run_id_for("j", at, EPOCH)) or {}), "status": "running", "version": 2}
    seed(store, started)  # the racer's run started
    assert backfill_step(head, seen, at, NOW).outcome == "create"
    ours = backfill_with_head_ops(record(at, EPOCH, RunStatus.PENDING, kind="backfill"), find_head(store))
    lost = write(store, ours)
    assert lost is not None and lost.op is ours[0]
    assert failing_parts(lost.op.condition, lost.current) == [_backfill_record_absent()]
    assert after_join_failure(ours, lost.op) is JoinRetry.MADE
    # Without backfill.run_absent the put replaces the running record: the instant runs twice.
    assert write(store, without(ours, _backfill_record_absent())) is None
    replaced = get(store, run_id_for("j", at, EPOCH))
    assert replaced is not None and replaced["status"] == "pending"


def test_a_backfill_meets_a_claim_or_a_relink_and_reads_the_head_again() -> None:
    """The model's ``backfill-tick``; and HC11's "as read in the relink's transaction": the
    relink holds the head's version, so a range checked against a head that moved is checked
    again."""
    at = T0 - 10 * MINUTE
    store, head = world()
    ops = backfill_with_head_ops(record(at, EPOCH, RunStatus.PENDING, kind="backfill"), head)
    claim(store, head)
    lost = write(store, ops)
    assert lost is not None and lost.op is ops[2] and after_join_failure(ops, lost.op) is JoinRetry.READ_AGAIN
    store, head = world()
    ops = backfill_with_head_ops(record(at, EPOCH, RunStatus.PENDING, kind="backfill"), head)
    assert write(store, adhoc_ops(manual_run(), state_item(), head)) is None
    lost = write(store, ops)
    assert lost is not None and lost.op is ops[1] and after_join_failure(ops, lost.op) is JoinRetry.READ_AGAIN


def test_manual_claim_stale_page_a_claim_after_the_relink_still_lands_and_its_stale_token_is_fenced() -> None:
    """HC3's forward race (the model's ``manual-claim-stale-page``): the relink lands first, then a
    claimer holding an older page of the ``due`` index claims N (its successor is still free). The
    chain stays whole (N+1 behind N, N behind M), and N's message, built from the old page,
    carries N's old version: its start is fenced, and the redispatch (or the worker's adoption)
    sends N with its own."""
    store, n = world()
    assert write(store, adhoc_ops(manual_run(), state_item(), n)) is None
    n1 = claim(store, n)  # the stale page's N: version 1, after_run_id j@prev
    relinked = get(store, n["run_id"])
    assert relinked is not None and relinked["version"] == 2 and n["version"] == 1
    assert relinked["after_run_id"] == "j@manual:r1" and n1["after_run_id"] == n["run_id"]
    made = get(store, "j@manual:r1")
    assert made is not None and made["after_run_id"] == "j@prev"


def test_an_ad_hoc_run_meeting_the_lifes_last_claim_waits_for_the_finish_write() -> None:
    """HC5 beside HC3: the head is its life's last (``max_runs``); its claim puts the end marker
    between the ad-hoc run's read and write. The check at the end key fails; read again, the job
    has no head and its state is still active: refused until the finish write copies the chain's
    end, after which the run joins behind the last run."""
    last = head_item(
        HeadJob.of_definition(definition(max_runs=3)),
        T0,
        EPOCH,
        through=T0 - 5 * MINUTE,
        shard_count=CFG.shard_count,
        check_delay_ms=head_check_delay_ms(CFG),
        runs_before=2,
        after_run_id="j@prev",
    )
    store, _ = world()
    store.tables[RUNS].clear()
    seed(store, last)
    ops = adhoc_ops(manual_run(), state_item(), last)
    marker = claim(store, last)
    lost = write(store, ops)
    assert lost is not None and lost.op is ops[2] and after_join_failure(ops, lost.op) is JoinRetry.READ_AGAIN
    state = store.get(STATE, {"job_id": "j"})
    assert state is not None and reads_as_finished(state, None, marker)
    with pytest.raises(NoHeadRead):
        adhoc_ops(manual_run(), state, None)
    assert write(store, finish_life_ops(state, marker, NOW)) is None
    finished = store.get(STATE, {"job_id": "j"})
    assert finished is not None and finished["status"] == "finished"
    assert write(store, adhoc_ops(manual_run(), finished, None)) is None
    made = get(store, "j@manual:r1")
    assert made is not None and made["after_run_id"] == last["run_id"]


def test_a_record_built_at_its_legacy_id_is_keyed_in_the_heads_epoch() -> None:
    legacy = record(T0 - 10 * MINUTE, None, RunStatus.PENDING, kind="backfill")
    keyed = in_epoch(legacy, EPOCH, CFG.shard_count)
    assert keyed["run_id"] == run_id_for("j", T0 - 10 * MINUTE, EPOCH) != legacy["run_id"]
    assert keyed["lease_shard"] == shard_of(keyed["run_id"], CFG.shard_count)
    assert "lease_shard" not in in_epoch(record(T0 - 10 * MINUTE, None, RunStatus.MISSED), EPOCH, 8)


# --- every interleaving -----------------------------------------------------------------------------

Step = Generator[None, None, None]


def adhoc_actor(store: MemoryStore, request: str, tries: int = 2, answer_lost: bool = False) -> Step:
    """Operations' ad-hoc run: read the head (HC12), write, and after a failure decide
    (``after_join_failure``): made, or read the head again. ``answer_lost``: the first write
    lands but its answer is lost, so the request is made again."""
    for attempt in range(tries):
        head = find_head(store)
        yield
        ops = adhoc_ops(manual_run(request), state_item(), head)
        lost = write(store, ops)
        # The model's adhoc_behind_claimed, checked in the write's own step: the head it relinked
        # was not claimed.
        assert lost is not None or not adhoc_behind_claimed(items(store), str(head["run_id"]))
        if lost is None and not (answer_lost and attempt == 0):
            return
        if lost is not None and after_join_failure(ops, lost.op) is JoinRetry.MADE:
            return
        yield


def claim_actor(store: MemoryStore) -> Step:
    """A tick: read the head (a due page), put its successor; a failed put sends nothing."""
    head = find_head(store)
    yield
    write(store, [claim_head_op(head, NOW, "t/1", CFG)])


def interleavings(make: Callable[[MemoryStore], list[Step]]) -> Iterator[MemoryStore]:
    """Every order of the actors' steps (depth first; each schedule replayed from a fresh store)."""
    pending: list[list[int]] = [[]]
    while pending:
        prefix = pending.pop()
        store, _ = world()
        actors = make(store)
        alive = list(range(len(actors)))
        for choice in prefix:
            if next(actors[choice], StopIteration) is StopIteration:
                alive.remove(choice)
        while alive:
            pending.extend([*prefix, other] for other in alive[1:])
            prefix = [*prefix, alive[0]]
            if next(actors[alive[0]], StopIteration) is StopIteration:
                alive.remove(alive[0])
        yield store


def one_chain(store: MemoryStore) -> list[str]:
    """The runs from the head back to the chain's start: each run once, every run on it (the ad-hoc
    runs and the claimed occurrences), no two runs behind one (which could overlap)."""
    by_id = {str(item["run_id"]): item for item in items(store)}
    head = find_head(store)
    manual = {run_id for run_id in by_id if run_id.startswith("j@manual:")}
    walked: list[str] = []
    link = head.get("after_run_id")
    while link is not None and link != "j@prev":
        assert link not in walked, walked
        walked.append(str(link))
        link = by_id[str(link)].get("after_run_id")
    claimed = {str(item["run_id"]) for item in by_id.values() if item.get("next_key") in by_id}
    assert set(walked) == manual | claimed, (walked, manual, claimed)
    links = [item.get("after_run_id") for item in by_id.values() if item.get("after_run_id")]
    assert len(links) == len(set(links)), links
    return walked


def test_every_interleaving_of_two_ad_hoc_runs_and_a_claim_keeps_one_chain() -> None:
    schedules = 0
    for store in interleavings(
        lambda store: [adhoc_actor(store, "a"), adhoc_actor(store, "b"), claim_actor(store)]
    ):
        schedules += 1
        one_chain(store)
    assert schedules > 100


def test_every_interleaving_of_a_retried_request_and_two_claims_keeps_one_chain() -> None:
    def actors(store: MemoryStore) -> list[Step]:
        return [adhoc_actor(store, "a", tries=3, answer_lost=True), claim_actor(store), claim_actor(store)]

    schedules = 0
    for store in interleavings(actors):
        schedules += 1
        chain = one_chain(store)
        assert chain.count("j@manual:a") == 1  # made once, whatever the order
    assert schedules > 50
