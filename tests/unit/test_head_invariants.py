"""The successor claim's invariants in core (``jobsched.core.head_invariants``, issue 37; build plan
docs/proposals/successor-claim-build.md): each check holds on a snapshot that keeps it and fires on
a hand-built one that breaks it, and on every state the executable model reaches
(``tools/jobsched_tools/successor``) the product's checks find what the model's own checks find:
nothing on the sets that hold, the same invariants on the mutants that break them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from jobsched.core import head_invariants as hi
from jobsched.core.config import SchedulerConfig
from jobsched.core.head_change import HeadChangePlan, plan_head_change
from jobsched.core.invariants import Violation
from jobsched.core.job import JobDefinition
from jobsched.core.run import RunKind, RunStatus, end_run_id, manual_run_id, run_id_for
from jobsched.core.transitions.claim import new_run_item
from jobsched.core.transitions.finish import finish_ops
from jobsched.core.transitions.head_adhoc import adhoc_ops, backfill_run_id, backfill_with_head_ops
from jobsched.core.transitions.head_change import head_change_ops
from jobsched.core.transitions.head_claim import claim_head_op
from jobsched.core.transitions.head_recover import redispatch_head_op
from jobsched.core.transitions.head_settle import settle_head_ops
from jobsched.core.writes import RUNS, STATE, Check, Item, Put, Update, WriteOp
from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.successor import invariants as model_inv
from jobsched_tools.successor import invariants_mis as model_mis
from jobsched_tools.successor import sets_overlap
from jobsched_tools.successor import writes as mw
from jobsched_tools.successor.model_reads import H2P, LEAK, ReadsWorld, check_reads_tables
from jobsched_tools.successor.search import explore
from jobsched_tools.successor.sets import MUTANTS, SETS, ActorSet
from jobsched_tools.successor.sets_mis import MUTANTS_MIS, SETS_MIS, WorldMis
from jobsched_tools.successor.sets_reads import READS_MUTANTS, READS_SETS
from jobsched_tools.successor.world import World

JOB = "j"
T0 = 1_764_547_200_000  # 2025-12-01T00:00:00Z
MIN = 60_000


def at(minutes: float) -> int:
    return T0 + int(minutes * MIN)


def rid(minutes: float, epoch: int | None = 1) -> str:
    return run_id_for(JOB, at(minutes), epoch)


# --- hand-built snapshots ---------------------------------------------------------------------------


def head(minutes: float, epoch: int = 1, after: str | None = None, **extra: Any) -> dict[str, Any]:
    """A head of ``rate(5 minutes)`` at ``minutes`` (its successor five minutes later)."""
    return {
        "job_id": JOB,
        "run_id": rid(minutes, epoch),
        "kind": "scheduled",
        "status": "scheduled",
        "scheduled_at": at(minutes),
        "epoch": epoch,
        "next_at": at(minutes + 5),
        "next_key": rid(minutes + 5, epoch),
        "after_run_id": after,
        "version": 1,
        **extra,
    }


def claimed_head(minutes: float, behind: str, epoch: int = 1, **extra: Any) -> dict[str, Any]:
    """The claim of ``behind``: its successor, a head with ``claimed_by``."""
    return head(
        minutes, epoch, after=behind, **{"claimed_by": "tick", "claimed_at": at(minutes - 6), **extra}
    )


def marker(minutes: float, epoch: int = 1, closed_by: int = 2) -> dict[str, Any]:
    return {
        "job_id": JOB,
        "run_id": rid(minutes, epoch),
        "status": "closed",
        "scheduled_at": at(minutes),
        "closes_epoch": epoch,
        "closed_by": closed_by,
    }


def state(status: str = "active", latest: str | None = None) -> dict[str, Any]:
    return {"job_id": JOB, "status": status, "version": 1, "latest_run_id": latest}


def found(
    runs: Sequence[Mapping[str, Any]],
    st: Mapping[str, Any] | None = None,
    messages: Sequence[Mapping[str, Any]] | None = None,
    lives: Mapping[str, hi.Life] | None = None,
) -> dict[str, list[str]]:
    violations = hi.check([st if st is not None else state()], runs, messages, lives)
    out: dict[str, list[str]] = {}
    for v in violations:
        out.setdefault(v.invariant, []).append(v.key)
    return out


def chain_00_05_claimed() -> list[dict[str, Any]]:
    """00:05 claimed (its message may be on its way), 00:10 the head behind it."""
    return [head(5), claimed_head(10, rid(5))]


def test_a_healthy_chain_holds_every_check() -> None:
    runs = [
        {**head(5), "status": "succeeded", "version": 3},
        {**claimed_head(10, rid(5)), "status": "running", "version": 2},
        claimed_head(15, rid(10)),
        claimed_head(20, rid(15)),
    ]
    message = {"run_id": rid(15), "version": 1, "after_run_id": rid(10)}
    assert found(runs, messages=[message], lives={JOB: hi.Life(max_runs=3)}) == {}


# H1 ---------------------------------------------------------------------------------------------------


def test_only_the_checks_asked_for_run_and_jobs_are_judged_apart() -> None:
    two_heads = [head(5), head(10, epoch=2)]
    assert {v.invariant for v in hi.check([state()], two_heads, only=[hi.ONE_HEAD])} == {hi.ONE_HEAD}
    assert hi.check([state()], two_heads, only=[hi.CLOSED_HEAD]) == []
    other = {
        **head(5),
        "job_id": "k",
        "run_id": run_id_for("k", at(5), 1),
        "next_key": run_id_for("k", at(10), 1),
    }
    other_state = {**state(), "job_id": "k"}
    assert hi.check([state(), other_state], [*chain_00_05_claimed(), other]) == []
    assert [v.key for v in hi.check([state(), other_state], chain_00_05_claimed())] == ["k"]  # k: no head


def test_h1_an_active_job_has_one_head() -> None:
    assert found(chain_00_05_claimed()) == {}
    assert found([head(5), head(10, epoch=2)])[hi.ONE_HEAD] == [JOB]  # two heads
    assert found([])[hi.ONE_HEAD] == [JOB]  # none, and no end marker


def test_h1_a_paused_job_has_none_and_a_finished_life_has_its_end_marker() -> None:
    assert found([head(5)], state("paused"))[hi.ONE_HEAD] == [JOB]
    cancelled = {**head(5), "status": "cancelled"}
    assert found([cancelled, marker(10)], state("paused")) == {}
    last = {**head(5), "next_key": end_run_id(JOB, at(5), 1)}
    end: dict[str, Any] = {
        "job_id": JOB,
        "run_id": end_run_id(JOB, at(5), 1),
        "status": "end",
        "after_run_id": rid(5),
    }
    end |= {"claimed_by": "tick", "claimed_at": at(4)}
    assert found([last, end]) == {}  # active, no head, its end marker: finished at once
    beside = claimed_head(10, rid(5))  # a claim past the end (the key was not the end marker's)
    assert hi.ONE_HEAD in found([last, end, beside])


def test_h1_only_an_end_marker_of_the_states_live_epoch_finishes_the_job() -> None:
    """A life ended at epoch 1, then a raise of ``max_runs`` (a change, epoch 2) headed it again:
    an active state of epoch 2 with no head is not finished by epoch 1's marker (head_change.py)."""
    last = {**head(5), "status": "succeeded", "next_key": end_run_id(JOB, at(5), 1)}
    end = {"job_id": JOB, "run_id": end_run_id(JOB, at(5), 1), "status": "end", "after_run_id": rid(5)}
    assert found([last, end], {**state(), "epoch": 1}) == {}
    assert found([last, end], {**state(), "epoch": 2})[hi.ONE_HEAD] == [JOB]
    assert found([last, end, head(10, epoch=2, after=rid(5))], {**state(), "epoch": 2}) == {}


def test_h1_a_scheduled_occurrence_without_a_successor_key_is_flagged() -> None:
    orphan = {k: v for k, v in head(5).items() if k != "next_key"}
    assert found([orphan, head(10, after=None)])[hi.ONE_HEAD] == [rid(5)]


# H2, H2' -------------------------------------------------------------------------------------------------


def test_h2_a_run_has_a_run_as_successor() -> None:
    ran = {**head(5), "status": "running", "version": 2}
    assert found([ran, claimed_head(10, rid(5))]) == {}
    assert found([ran, head(10, epoch=2, after=rid(5))])[hi.CLAIM_IS_SUCCESSOR] == [rid(5)]  # nothing
    assert found([ran, marker(10), head(10, epoch=2)])[hi.CLAIM_IS_SUCCESSOR] == [rid(5)]  # closed


def test_h2_prime_a_message_names_a_claimed_run_only() -> None:
    message = {"run_id": rid(5), "version": 1}
    assert found(chain_00_05_claimed(), messages=[message]) == {}
    assert found([head(5)], messages=[message])[hi.UNCLAIMED_MESSAGE] == [rid(5)]
    stale = {"run_id": rid(5), "version": 7}  # any token: adoption would start it with the run's
    assert found([head(5)], messages=[stale])[hi.UNCLAIMED_MESSAGE] == [rid(5)]


# H3 ------------------------------------------------------------------------------------------------------


def test_h3_a_run_behind_a_closure_marker_is_closed() -> None:
    closed = {**head(5), "status": "cancelled", "version": 2}
    assert found([closed, marker(10), head(10, epoch=2)]) == {}
    assert found([head(5), marker(10), head(10, epoch=2)])[hi.CLOSED_HEAD] == [rid(5)]


def test_h3_a_person_may_rerun_a_closed_heads_missed_record_but_the_head_never_runs_as_claimed() -> None:
    """A pause decided the due head missed behind its marker; a backfill reruns the record in place
    (kind ``backfill``, ``missed_reason`` kept: chaos seed 1). The same run with its timed kind,
    the closed head running as its own claim, is still reported."""
    rerun = {**head(5), "status": "running", "version": 3, "kind": "backfill", "missed_reason": "job paused"}
    assert hi.CLOSED_HEAD not in found([rerun, marker(10), head(10, epoch=2)])
    as_claimed = {**rerun, "kind": "scheduled"}
    assert found([as_claimed, marker(10), head(10, epoch=2)])[hi.CLOSED_HEAD] == [rid(5)]


# H4 ------------------------------------------------------------------------------------------------------


def test_h4_nothing_links_to_an_unclaimed_head() -> None:
    manual = {"job_id": JOB, "run_id": manual_run_id(JOB, "r1"), "kind": "manual", "status": "pending"}
    assert found([{**manual, "after_run_id": None}, head(5, after=manual["run_id"])]) == {}
    assert found([{**manual, "after_run_id": rid(5)}, head(5)])[hi.LINK_TO_HEAD] == [manual["run_id"]]
    closed = {**head(5), "status": "cancelled", "version": 2}
    linked_to_cancelled = head(10, epoch=2, after=rid(5))
    assert found([closed, marker(10), linked_to_cancelled])[hi.LINK_TO_HEAD] == [rid(10, 2)]
    message = {"run_id": manual["run_id"], "version": 1, "after_run_id": rid(5)}
    manual_ok = {**manual, "after_run_id": None}
    assert found([manual_ok, head(5, after=manual["run_id"])], messages=[message])[hi.LINK_TO_HEAD] == [
        manual["run_id"]
    ]


# H5' ------------------------------------------------------------------------------------------------------


def test_h5_prime_a_successor_key_holds_its_claim_its_settle_or_a_marker() -> None:
    assert found(chain_00_05_claimed()) == {}
    settled = [{**head(5), "status": "missed", "version": 2, "settled_at": at(6)}, head(10)]
    assert found(settled) == {}
    backfill = {
        "job_id": JOB,
        "run_id": rid(10),
        "kind": "backfill",
        "status": "pending",
        "scheduled_at": at(10),
        "after_run_id": None,
    }
    # A backfill's record at the head's successor key (HC11's refusal missing).
    assert found([head(5, after=rid(10)), backfill])[hi.SUCCESSOR_WRITER] == [rid(10)]


def test_h5_prime_a_successor_of_another_epoch_is_flagged() -> None:
    odd = {**head(5), "next_key": rid(10, 2)}
    assert found([odd, claimed_head(10, rid(5), epoch=2)])[hi.SUCCESSOR_WRITER] == [rid(10, 2)]


# I1' ------------------------------------------------------------------------------------------------------


def test_i1_prime_one_live_record_per_instant() -> None:
    cancelled = {**head(5), "status": "cancelled", "version": 2}
    # A cancelled head and a marker of epoch 1 beside the new epoch's head: one live record.
    assert found([cancelled, marker(10), head(5, epoch=2)]) == {}
    missed = {**head(5), "status": "missed", "version": 2}
    assert found([missed, marker(10), head(5, epoch=2)])[hi.ONE_LIVE_RECORD] == [rid(5, 2)]
    legacy: dict[str, Any] = {
        "job_id": JOB,
        "run_id": rid(5, None),
        "kind": "scheduled",
        "status": "succeeded",
    }
    legacy |= {"scheduled_at": at(5)}
    assert found([legacy, head(10)]) == {}
    assert hi.ONE_LIVE_RECORD in found([legacy, head(5)])  # a legacy record and a head of 00:05
    legacy_cancelled = {**legacy, "status": "cancelled"}  # epoch 0: a record (today's fence)
    assert hi.ONE_LIVE_RECORD in found([legacy_cancelled, head(5)])


@pytest.mark.parametrize(
    "item",
    [
        {**head(5), "scheduled_at": at(6)},  # not its id's instant
        {**head(5), "epoch": 2},  # not its id's epoch
        {**head(5), "run_id": rid(5, None), "next_key": rid(10, None)},  # a head at a legacy id
        {"job_id": JOB, "run_id": rid(5), "status": "end"},  # an end marker at a timed id
        {"job_id": JOB, "run_id": f"{JOB}@yesterday#1", "status": "missed"},  # not a run id
        {"job_id": JOB, "run_id": "other@2025-12-01T00:05:00Z#1", "status": "missed"},  # another job's
    ],
)
def test_i1_prime_ids_say_what_their_items_are(item: dict[str, Any]) -> None:
    assert hi.ONE_LIVE_RECORD in found([item, head(10)])


# I3, I3' ----------------------------------------------------------------------------------------------------


def test_i3_every_unfinished_run_is_reachable_from_the_chain_end() -> None:
    assert found(chain_00_05_claimed()) == {}
    astray = {**claimed_head(10, rid(5)), "after_run_id": None}  # the head forgot 00:05
    assert found([head(5), astray])[hi.UNREACHABLE] == [rid(5)]
    paused = [
        {**head(5), "status": "running", "version": 2},
        {**claimed_head(10, rid(5)), "status": "cancelled"},
    ]
    paused.append(marker(15))
    assert found(paused, state("paused", latest=rid(5))) == {}
    assert found(paused, state("paused", latest=None))[hi.UNREACHABLE] == [rid(5)]


def test_i3_prime_a_message_follows_its_record() -> None:
    assert found(chain_00_05_claimed(), messages=[{"run_id": rid(5), "version": 1}]) == {}
    ghost = {"run_id": rid(0), "version": 1}
    assert found(chain_00_05_claimed(), messages=[ghost])[hi.MESSAGE_WITHOUT_RECORD] == [rid(0)]


# I6' ------------------------------------------------------------------------------------------------------


def test_i6_prime_no_record_beyond_the_head_but_a_backfills() -> None:
    beyond = {**head(20), "status": "succeeded", "version": 3, "next_key": rid(25)}
    assert found([*chain_00_05_claimed(), beyond])[hi.BEYOND_HEAD] == [rid(20)]
    backfill = {"job_id": JOB, "run_id": rid(20), "kind": "backfill", "status": "succeeded"}
    assert hi.BEYOND_HEAD not in found([*chain_00_05_claimed(), backfill])
    assert found([*chain_00_05_claimed(), marker(30)]) == {}  # a marker is not a record


# max_runs -------------------------------------------------------------------------------------------------


def test_the_runs_of_a_life_stay_within_max_runs() -> None:
    runs = [{**head(5), "status": "succeeded"}, {**claimed_head(10, rid(5)), "status": "running"}]
    runs.append(claimed_head(15, rid(10)))
    assert found(runs, lives={JOB: hi.Life(max_runs=2)}) == {}
    assert found(runs, lives={JOB: hi.Life(max_runs=1)})[hi.BEYOND_MAX_RUNS] == [JOB]
    # A new life (from epoch 2) counts its own runs only.
    assert found(runs, lives={JOB: hi.Life(max_runs=1, first_epoch=2)}) == {}


# --- the checks of a write ------------------------------------------------------------------------------


def by_id(*items: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(i["run_id"]): i for i in items}


def written(
    before: Mapping[str, Mapping[str, Any]],
    after: Mapping[str, Mapping[str, Any]],
    now: int,
    ledger: hi.WriteLedger | None = None,
) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for v in hi.check_write(before, after, now, ledger if ledger is not None else hi.WriteLedger()):
        out.setdefault(v.invariant, []).append(v.key)
    return out


def test_i4_prime_a_start_takes_the_runs_token_once() -> None:
    before = by_id(*chain_00_05_claimed())
    started = {**head(5), "status": "running", "version": 2}
    ledger = hi.WriteLedger()
    assert written(before, {**before, rid(5): started}, at(5), ledger) == {}
    # Recovered (token 3), then started again by a stale message: to token 2 again.
    recovered = {**started, "status": "scheduled", "version": 3}
    again = {**started, "version": 2}
    assert written({**before, rid(5): recovered}, {**before, rid(5): again}, at(6), ledger) == {
        hi.STALE_START: [rid(5)],
        hi.STARTED_TWICE: [rid(5)],
    }


def test_i4_prime_two_records_of_one_instant_never_both_start() -> None:
    ledger = hi.WriteLedger()
    first = by_id(head(5), claimed_head(10, rid(5)))
    assert (
        written(first, {**first, rid(5): {**head(5), "status": "running", "version": 2}}, at(5), ledger) == {}
    )
    other = head(5, epoch=2)  # a second record of 00:05 (I1' broken), claimed too
    twin = {**first, rid(5, 2): other, rid(10, 2): claimed_head(10, rid(5, 2), epoch=2)}
    after = {**twin, rid(5, 2): {**other, "status": "running", "version": 2}}
    assert written(twin, after, at(5), ledger) == {hi.OCCURRENCE_STARTED_TWICE: [rid(5, 2)]}


def test_h3_a_closed_head_never_starts() -> None:
    before = by_id(head(5), marker(10))
    after = {**before, rid(5): {**head(5), "status": "running", "version": 2}}
    assert written(before, after, at(5)) == {hi.CLOSED_STARTED: [rid(5)]}


def test_h2_a_claimed_run_is_never_closed_after() -> None:
    ledger = hi.WriteLedger()
    before = by_id(head(5))
    claimed = {**before, rid(10): claimed_head(10, rid(5))}
    assert written(before, claimed, at(4), ledger) == {}
    assert ledger.claimed == {rid(5)}
    closed = {**claimed, rid(5): {**head(5), "status": "missed", "version": 2}}
    assert written(claimed, closed, at(7), ledger) == {hi.CLAIMED_CLOSED: [rid(5)]}
    settled = {**claimed, rid(5): {**head(5), "version": 2, "settled_at": at(7)}}  # decided again
    assert written(claimed, settled, at(7), hi.WriteLedger(claimed={rid(5)})) == {hi.CLAIMED_CLOSED: [rid(5)]}


def test_a_settle_that_ends_the_life_behind_its_kept_run_is_not_a_claim() -> None:
    ledger = hi.WriteLedger()
    end_id = end_run_id(JOB, at(5), 1)
    before = by_id({**head(5), "next_key": end_id})
    kept = {**head(5), "next_key": end_id, "version": 2, "settled_at": at(7)}
    end = {"job_id": JOB, "run_id": end_id, "status": "end", "after_run_id": rid(5), "claimed_by": "settle"}
    assert written(before, by_id(kept, end), at(7), ledger) == {}
    assert ledger.claimed == set()


def test_adhoc_relinks_only_an_unclaimed_head() -> None:
    manual = {"job_id": JOB, "run_id": manual_run_id(JOB, "r1"), "kind": "manual", "status": "pending"}
    before = by_id(head(5, after=None))
    relinked = {**head(5, after=manual["run_id"]), "version": 2}
    assert written(before, by_id(manual, relinked), at(4)) == {}
    claimed = {**before, rid(10): claimed_head(10, rid(5))}
    after = {**claimed, manual["run_id"]: manual, rid(5): relinked}
    assert written(claimed, after, at(4)) == {hi.ADHOC_BEHIND_CLAIMED: [rid(5)]}


def test_a_running_run_is_fenced_only_by_its_end_or_its_lapsed_lease() -> None:
    running = {**head(5), "status": "running", "version": 2, "lease_expires_at": at(6), "attempt": 1}
    before = by_id(running, claimed_head(10, rid(5)))
    committed = {**running, "status": "succeeded", "version": 3}
    assert written(before, {**before, rid(5): committed}, at(5.5)) == {}
    retry = {**running, "status": "pending", "version": 3, "attempt": 2}
    assert written(before, {**before, rid(5): retry}, at(5.5)) == {}
    recovered = {**running, "status": "pending", "version": 3, "attempt": 2, "recoveries": 1}
    assert written(before, {**before, rid(5): recovered}, at(6)) == {}
    assert written(before, {**before, rid(5): recovered}, at(5.5)) == {hi.LIVE_RUN_FENCED: [rid(5)]}
    relinked = {**running, "version": 3}  # still running, a new token: its commit will fail
    assert written(before, {**before, rid(5): relinked}, at(5.5)) == {hi.LIVE_RUN_FENCED: [rid(5)]}


def test_a_redispatch_waits_for_the_claims_dispatch_lease() -> None:
    claim = claimed_head(10, rid(5), claimed_at=at(4))
    before = by_id(head(5), claim)
    again = {**head(5), "version": 2}
    lease = 30_000 + 2_000
    assert written(before, {**before, rid(5): again}, at(4) + lease) == {}
    assert written(before, {**before, rid(5): again}, at(4) + lease - 1) == {hi.REDISPATCHED_EARLY: [rid(5)]}
    unclaimed = by_id(head(5))  # its successor absent: nothing to redispatch
    assert written(unclaimed, by_id(again), at(9)) == {hi.REDISPATCHED_EARLY: [rid(5)]}


# --- against the model: every state it reaches -------------------------------------------------------

# The model's checks and the product's that port them. A model check missing here is not ported
# (committed_twice, stale_commit: the commit's fence, unchanged by the successor claim); a product
# check missing from every row (H4, H5', I3') has no model counterpart, so must find nothing on
# any state the model reaches where the model's checks find nothing.
MODEL_TABLE: dict[str, frozenset[str]] = {
    model_inv.H1: frozenset({hi.ONE_HEAD}),
    model_inv.H2: frozenset({hi.CLAIM_IS_SUCCESSOR, hi.UNCLAIMED_MESSAGE}),
    model_inv.H3: frozenset({hi.CLOSED_HEAD}),
    model_inv.I6: frozenset({hi.BEYOND_HEAD}),
    model_inv.I3: frozenset({hi.UNREACHABLE}),
    model_mis.ONE_LIVE: frozenset({hi.ONE_LIVE_RECORD}),
    model_mis.BEYOND_MAX: frozenset({hi.BEYOND_MAX_RUNS}),
    model_mis.AFTER_END: frozenset({hi.ONE_HEAD, hi.BEYOND_HEAD}),
    LEAK: frozenset({hi.DUE_LEFT}),  # model_reads.py finished_in_due
}
MODEL_WRITE: dict[str, frozenset[str]] = {
    model_inv.I4: frozenset({hi.STALE_START}),
    model_inv.TWICE: frozenset({hi.STARTED_TWICE}),
    model_inv.OCCURRENCE_TWICE: frozenset({hi.OCCURRENCE_STARTED_TWICE}),
    model_inv.CLOSED_STARTED: frozenset({hi.CLOSED_STARTED}),
    model_inv.CLAIMED_CLOSED: frozenset({hi.CLAIMED_CLOSED}),
    model_mis.LATE_CLAIMED: frozenset({hi.CLAIMED_CLOSED}),
    model_inv.ADHOC_BEHIND: frozenset({hi.ADHOC_BEHIND_CLAIMED}),
    model_inv.LIVE_FENCED: frozenset({hi.LIVE_RUN_FENCED}),
    model_inv.EARLY: frozenset({hi.REDISPATCHED_EARLY}),
}


def product_id(value: object) -> str | None:
    """A model key as the product writes it: the model's end key (``j@end:<ms>#<epoch>``) is
    ``end_run_id``; its backfill key (``<timed id>#0``, one per instant, no timing's epoch) is the
    legacy id, which reads as epoch 0. Timed keys are already ``run_id_for(job, at, epoch)``."""
    if value is None:
        return None
    key = str(value)
    if key.startswith(f"{mw.JOB}@end:"):
        instant, epoch = key[len(f"{mw.JOB}@end:") :].split("#")
        return end_run_id(mw.JOB, int(instant), int(epoch))
    return key[: -len("#0")] if key.endswith("#0") else key


def product_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A model item as the product's: ``at`` is ``scheduled_at``; an ad-hoc or backfill run not
    started is ``pending`` (the model keeps it ``scheduled``: the plan's §1, "against the model")."""
    out = {k: v for k, v in item.items() if k != "at"}
    for name in ("run_id", "next_key", "after_run_id"):
        if name in out:
            out[name] = product_id(out[name])
    if "at" in item:
        out["scheduled_at"] = item["at"]
    if item.get("kind") in ("manual", "backfill") and item.get("status") == mw.SCHEDULED:
        out["status"] = "pending"
    return out


def product_runs(runs: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    return {str(product_id(run_id)): product_item(run) for run_id, run in runs.items()}


@dataclass
class Agreement:
    """Each state and write the model reached, judged by both: where they disagree."""

    states: int = 0
    writes: int = 0
    fired: set[str] = field(default_factory=set)  # the product checks that fired somewhere
    missed: list[str] = field(default_factory=list)  # the model's check fired, its port did not
    extra: list[str] = field(default_factory=list)  # a product check fired beyond the model's

    def compare(self, what: str, model: set[str], mine: set[str], rows: Mapping[str, frozenset[str]]) -> None:
        ported = {name for name in model if name in rows}
        expected = set().union(*(rows[name] for name in ported)) if ported else set()
        self.fired |= mine
        if any(not rows[name] & mine for name in ported):
            self.missed.append(f"{what}: model {sorted(model)}, product {sorted(mine)}")
        if mine - expected:
            self.extra.append(f"{what}: model {sorted(model)}, product {sorted(mine)}")


def _lives(world: World) -> dict[str, hi.Life] | None:
    max_runs = getattr(world.proto, "max_runs", None)
    return {mw.JOB: hi.Life(int(max_runs))} if max_runs is not None else None


@pytest.fixture
def agreement(monkeypatch: pytest.MonkeyPatch) -> Iterator[Agreement]:
    """The model's world, with the product's checks run beside the model's after every write and
    send (on the tables as the product would hold them), and compared."""
    seen = Agreement()
    base_check, base_after_write = World.check, World.after_write

    def check(self: World) -> None:
        base_check(self)
        state, runs, bodies = self.state(), self.runs(), [m.body for m in self.queue]
        model = {v[0] for v in model_inv.check_tables(state, runs, bodies)}
        if isinstance(self, WorldMis):
            model |= {v[0] for v in model_mis.check_tables(self.proto, runs)}  # type: ignore[arg-type]
        # finished_in_due is the reads extension's (its world's runs end their due entry; the
        # overlap model's buffered runs are outside the model's two statuses).
        ported = (H2P, LEAK) if isinstance(self, ReadsWorld) else (H2P,)
        model |= {v[0] for v in check_reads_tables(runs, bodies) if v[0] in ported}
        states = [{**state, "latest_run_id": product_id(state.get("chain_end"))}] if state else []
        messages = [
            {**b, "run_id": product_id(b["run_id"]), "after_run_id": product_id(b.get("after_run_id"))}
            for b in bodies
        ]
        mine = {v.invariant for v in hi.check(states, product_runs(runs).values(), messages, _lives(self))}
        seen.states += 1
        model = {model_inv.H2 if name == H2P else name for name in model}  # H2' is the model's H2 too
        seen.compare(f"state after {self.trace[-1:] or 'set-up'}", model, mine, MODEL_TABLE)

    def after_write(self: World, ops: Sequence[WriteOp], before: dict[str, Item]) -> None:
        base_after_write(self, ops, before)
        runs, now = self.runs(), self.clock_of_write
        model = {v[0] for v in model_inv.check_write(ops, before, runs, self.ledger, now)}
        if isinstance(self, WorldMis):
            model |= {v[0] for v in model_mis.check_write(ops, self.ledger.claimed, self.settled)}
        ledger = self.__dict__.setdefault("product_ledger", hi.WriteLedger())
        was = product_runs(before)
        if self.sched.actor_here() is None:
            # The drive to quiescence (serial, every actor done or dead) recovers a running run by
            # its check_at alone, a lease a heartbeat renewed or not (model_reads.py: only actors'
            # recoveries are judged by the lease). Judged by check_at here too, as the model does.
            was = {
                run_id: {k: v for k, v in run.items() if k != "lease_expires_at"}
                for run_id, run in was.items()
            }
        mine = {
            v.invariant
            for v in hi.check_write(was, product_runs(runs), now, ledger, mw.DISPATCH_LEASE_MS, mw.SKEW_MS)
        }
        seen.writes += 1
        seen.compare(f"write {[op.label for op in ops]} at {now}", model, mine, MODEL_WRITE)

    monkeypatch.setattr(World, "check", check)
    monkeypatch.setattr(World, "after_write", after_write)
    yield seen


# A few sets of each family at k=1, each a second or less: the base model (sets.py), misfire,
# max_runs and backfill (sets_mis.py), reads, heartbeats and adoption (sets_reads.py), the overlap
# policies' walk (sets_overlap.py). The slow sweep below runs every set and mutant.
AGREE_SETS: dict[str, tuple[ActorSet, mw.Protocol | None]] = {
    **{
        name: (SETS[name], None)
        for name in (
            "tick-tick-crash",
            "tick-retime",
            "tick-manual",
            "claim-settle",
            "pause-resume-marker",
            "retime-onto-claimed",
            "detector-worker",
            "stale-claim-across-settle",
        )
    },
    **{
        name: (SETS_MIS[name], None)
        for name in ("outage-run-all", "last-claim-settle", "backfill-settle", "backfill-two-instants")
    },
    **{
        name: (READS_SETS[name], None)
        for name in ("adopt-stale-page", "late-heartbeat-recover", "two-detectors")
    },
    **{
        name: (sets_overlap.SETS[name][0], sets_overlap.protocol_for(name))
        for name in ("ovl-overtake-skip", "ovl-promoters-buffer_one", "ovl-waiting-race-cancel_other")
    },
}
EVERY_SET: dict[str, tuple[ActorSet, mw.Protocol | None]] = {
    **{name: (actor_set, None) for name, actor_set in SETS.items()},
    **{name: (actor_set, None) for name, actor_set in SETS_MIS.items()},
    **{name: (actor_set, None) for name, actor_set in READS_SETS.items()},
    **{name: (pair[0], sets_overlap.protocol_for(name)) for name, pair in sets_overlap.SETS.items()},
}
EVERY_MUTANT: dict[str, tuple[ActorSet, mw.Protocol]] = {
    **{name: (SETS[set_name], proto) for name, (proto, set_name) in MUTANTS.items()},
    **{name: (SETS_MIS[set_name], proto) for name, (proto, set_name) in MUTANTS_MIS.items()},
    **{name: (READS_SETS[set_name], proto) for name, (proto, set_name, _) in READS_MUTANTS.items()},
}


def _holds(actor_set: ActorSet, proto: mw.Protocol | None, agreement: Agreement) -> None:
    result = explore(actor_set, 1, proto)
    assert result.schedules > 0 and not result.counts, dict(result.counts)
    assert agreement.states > 0 and agreement.writes > 0
    assert agreement.missed == agreement.extra == [], (agreement.missed + agreement.extra)[:3]
    assert agreement.fired == set()


@pytest.mark.parametrize("name", sorted(AGREE_SETS))
def test_the_product_checks_find_nothing_where_the_model_finds_nothing(
    name: str, agreement: Agreement
) -> None:
    _holds(*AGREE_SETS[name], agreement)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(EVERY_SET) - set(AGREE_SETS)))
def test_every_other_model_set_agrees(name: str, agreement: Agreement) -> None:
    _holds(*EVERY_SET[name], agreement)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EVERY_MUTANT))
def test_the_product_checks_fire_wherever_the_models_do_on_every_mutant(
    name: str, agreement: Agreement
) -> None:
    actor_set, proto = EVERY_MUTANT[name]
    explore(actor_set, 1, proto)
    assert agreement.missed == [], agreement.missed[:3]


@pytest.mark.parametrize(
    ("mutant", "fires"),
    [
        ("claim without attribute_not_exists", {hi.ONE_HEAD, hi.CLAIMED_CLOSED, hi.UNREACHABLE}),
        ("change without its closure marker", {hi.ONE_HEAD, hi.CLAIMED_CLOSED, hi.OCCURRENCE_STARTED_TWICE}),
        ("ad-hoc run without its ConditionCheck", {hi.ADHOC_BEHIND_CLAIMED}),
        ("a settle leaves a missed last head's end key empty", {hi.ONE_HEAD, hi.CLAIMED_CLOSED}),
        ("a backfill at the head (no refusal)", {hi.ONE_LIVE_RECORD}),
    ],
)
def test_the_product_checks_catch_the_models_mutants(
    mutant: str, fires: set[str], agreement: Agreement
) -> None:
    actor_set, proto = EVERY_MUTANT[mutant]
    result = explore(actor_set, 1, proto)
    assert result.counts, "the model catches it"
    assert agreement.missed == [], agreement.missed[:3]
    assert fires <= agreement.fired


# --- on the product's own writes (core/transitions/head_*.py) ---------------------------------------


class ProductJob:
    """One ``rate(5 minutes)`` job on the product's in-memory store, written by the successor
    claim's core writes (the registrar's change, the claim, the settle chunk, the redispatch),
    checked after every write as the explorer and chaos will: the tables (with the queue's
    messages) and the write."""

    def __init__(self) -> None:
        self.store = MemoryStore()
        self.ledger = hi.WriteLedger()
        self.messages: list[dict[str, Any]] = []
        self.violations: list[Violation] = []

    def runs(self) -> dict[str, Item]:
        return {str(item["run_id"]): item for item in self.store.tables[RUNS].values()}

    def head(self) -> Item:
        runs = self.runs()
        (found,) = [run for run in runs.values() if hi.is_head(run, runs)]
        return found

    def write(self, ops: Sequence[WriteOp], now: int) -> None:
        before = self.runs()
        self.store.write(list(ops))
        after = self.runs()
        self.violations += hi.check_write(
            before,
            after,
            now,
            self.ledger,
            PRODUCT_CFG.dispatch_lease_seconds * 1000,
            PRODUCT_CFG.clock_skew_allowance_ms,
        )
        self.check()

    def check(self) -> None:
        states = list(self.store.tables[STATE].values())
        self.violations += hi.check(states, self.runs().values(), self.messages)

    def change(self, d: JobDefinition, now: int) -> None:
        runs = self.runs()
        heads = [run for run in runs.values() if hi.is_head(run, runs)]
        state = self.store.get(STATE, {"job_id": JOB})
        plan = plan_head_change(
            JOB, state, heads[0] if heads else None, d, d.definition_hash(), now, PRODUCT_CFG
        )
        assert isinstance(plan, HeadChangePlan), plan
        self.write(head_change_ops(plan, now, PRODUCT_CFG), now)

    def claim(self, now: int, drop: str | None = None, head: Item | None = None) -> None:
        n = head if head is not None else self.head()
        put = claim_head_op(n, now, "tick", PRODUCT_CFG)
        if drop is not None:
            put = Put(put.table, put.item, (), put.label)
        self.write([put], now)
        self.send(n)

    def send(self, run: Item) -> None:
        run = self.runs()[str(run["run_id"])]
        self.messages.append(
            {"run_id": run["run_id"], "version": run["version"], "after_run_id": run.get("after_run_id")}
        )
        self.check()

    def start_and_commit(self, run_id: str, now: int) -> None:
        run = self.runs()[run_id]
        version = int(run["version"])
        start = Update(
            RUNS,
            {"job_id": JOB, "run_id": run_id},
            (),
            "start",
            set={"status": "running", "version": version + 1, "lease_expires_at": now + 30_000},
        )
        self.write([start], now)
        self.write(
            [finish_ops(run_id, version + 1, RunStatus.RUNNING, RunStatus.SUCCEEDED, now, PRODUCT_CFG)], now
        )
        self.messages = [m for m in self.messages if m["run_id"] != run_id]


PRODUCT_CFG = SchedulerConfig()


def five_minutes(**changes: Any) -> JobDefinition:
    return JobDefinition.model_validate(
        {"job_id": JOB, "schedule": "rate(5 minutes)", "target": "noop", **changes}
    )


def test_the_checks_hold_on_a_life_written_by_the_products_writes() -> None:
    job = ProductJob()
    job.change(five_minutes(), at(1))  # registered: head 00:05#1
    job.claim(at(4))  # 00:05 claimed, 00:10#1 the head
    job.start_and_commit(rid(5), at(5))
    job.change(five_minutes(schedule="rate(10 minutes)"), at(6))  # 00:10#1 cancelled, 00:10#2 the head
    assert job.head()["run_id"] == rid(10, 2)
    chunk = settle_head_ops(job.head(), at(11.5), PRODUCT_CFG)  # 00:10#2 overdue: settled
    job.write(chunk.ops, at(11.5))
    for run in chunk.to_dispatch:
        job.send(run)
    for run in chunk.to_dispatch:
        job.start_and_commit(str(run["run_id"]), at(12))
    n = job.head()
    job.claim(at(19))
    lapsed = at(19) + PRODUCT_CFG.dispatch_lease_seconds * 1000 + PRODUCT_CFG.clock_skew_allowance_ms
    redispatch, _ = redispatch_head_op(job.runs()[str(n["run_id"])], lapsed, PRODUCT_CFG)
    job.write([redispatch], lapsed)
    job.send(n)
    job.start_and_commit(str(n["run_id"]), lapsed + 1)
    job.change(five_minutes(schedule="rate(10 minutes)", enabled=False), at(25))  # paused: no head
    runs = job.runs()
    assert not [run for run in runs.values() if hi.is_head(run, runs)]
    assert job.violations == []


def test_a_claim_over_a_closure_marker_is_caught_on_the_products_writes() -> None:
    """``claim.successor_absent`` removed: a claimer that read 00:10#1 before the retime puts its
    successor over the change's marker. The product's checks see the closed head claimed."""
    job = ProductJob()
    job.change(five_minutes(), at(1))
    job.claim(at(4))
    stale = job.head()  # 00:10#1, read by a claimer that then freezes
    job.change(five_minutes(schedule="rate(10 minutes)"), at(6))
    assert job.violations == []
    job.claim(at(9), drop="claim.successor_absent", head=stale)
    found = {v.invariant for v in job.violations}
    assert {hi.CLAIMED_CLOSED, hi.ONE_HEAD, hi.UNREACHABLE} <= found, found


def test_a_settle_over_a_late_claim_is_caught_on_the_products_writes() -> None:
    """``settle.successor_absent`` removed: a late claim of 00:05 lands first, then the detector's
    settle (from its read before the claim) overwrites the claim's head: the claimed run is
    decided again by the settle (HC9)."""
    job = ProductJob()
    job.change(five_minutes(), at(1))
    overdue = job.head()
    job.claim(at(6))  # late, within lookback
    chunk = settle_head_ops(overdue, at(6.5), PRODUCT_CFG)
    ops = [op if not isinstance(op, Put) else Put(op.table, op.item, (), op.label) for op in chunk.ops]
    ops = [
        op if not isinstance(op, Update) else Update(op.table, op.key, (), op.label, op.set, op.remove)
        for op in ops
    ]
    job.write(ops, at(6.5))
    assert hi.CLAIMED_CLOSED in {v.invariant for v in job.violations}


def _manual(request: str, now: int) -> Item:
    return new_run_item(JOB, manual_run_id(JOB, request), now, {}, "digest", RunKind.MANUAL, now, PRODUCT_CFG)


def test_the_checks_hold_on_ad_hoc_runs_and_a_backfill_written_by_the_products_writes() -> None:
    job = ProductJob()
    job.change(five_minutes(), at(1))
    job.claim(at(4))  # 00:05 claimed, 00:10#1 the head
    state = job.store.get(STATE, {"job_id": JOB})
    job.write(adhoc_ops(_manual("r1", at(4.5)), state, job.head()), at(4.5))  # M between 00:05 and 00:10
    head_now = job.head()
    assert head_now["after_run_id"] == manual_run_id(JOB, "r1")
    backfill = new_run_item(
        JOB, backfill_run_id(head_now, at(0)), at(0), {}, "digest", RunKind.BACKFILL, at(5), PRODUCT_CFG
    )
    job.write(backfill_with_head_ops(backfill, head_now), at(5))  # 00:00#1, behind M
    assert job.violations == []


def test_an_ad_hoc_run_relinking_a_claimed_run_is_caught_on_the_products_writes() -> None:
    """``adhoc.successor_absent`` removed (HC3): the relink of a head read before its claim lands
    after the claim, and the manual run joins ahead of a run already dispatched."""
    job = ProductJob()
    job.change(five_minutes(), at(1))
    stale = job.head()
    job.claim(at(4))
    state = job.store.get(STATE, {"job_id": JOB})
    ops = [op for op in adhoc_ops(_manual("r1", at(4.5)), state, stale) if not isinstance(op, Check)]
    job.write(ops, at(4.5))
    assert hi.ADHOC_BEHIND_CLAIMED in {v.invariant for v in job.violations}


def test_a_backfill_at_the_heads_successor_key_is_caught_on_the_products_writes() -> None:
    """HC11's refusal missing: a backfill of the instant after the head, in the head's epoch, sits
    at the head's successor key (H5'), where the claim will meet it."""
    job = ProductJob()
    job.change(five_minutes(), at(1))
    n = job.head()
    run = new_run_item(JOB, str(n["next_key"]), at(10), {}, "digest", RunKind.BACKFILL, at(4), PRODUCT_CFG)
    job.write([Put(RUNS, run, (), "backfill past the head")], at(4))
    assert hi.SUCCESSOR_WRITER in {v.invariant for v in job.violations}
