"""Every named condition part of core/transitions/ has a switch, and switching it off is caught
by the chaos run or the explorer (issue 34).

The parts are read from the source of core/transitions/ (``sim/mutants.condition_parts``), and
from the other core modules in ``MORE_MODULES`` (core/dead_letter.py, issue 38), not from a list
kept here: a condition added without a catcher, or without a reason why none can catch it,
fails ``test_every_condition_part_has_a_catcher_or_a_reason``. ``CATCHERS`` records, for each
part, the smallest chaos seed or explorer set known to catch its removal and the violation it
reports; the test runs only that one. A part ``UNCAUGHT`` calls redundant is in a set of
``PAIRS``, switched off together and caught. docs/promises.md is the ledger: which promise each
part keeps, and why each part in ``UNCAUGHT`` has no catcher.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from jobsched_tools.explore.scenarios import ACTOR_SETS
from jobsched_tools.explore.search import explore
from jobsched_tools.sim import ChaosConfig, FaultRates, run_chaos
from jobsched_tools.sim.mutants import MORE_MODULES, condition_parts, switched_off

LEDGER = Path(__file__).resolve().parents[2] / "docs" / "promises.md"


@dataclass(frozen=True)
class Chaos:
    """A chaos run: ``jobs`` jobs for ``hours`` from ``seed``, with these fault rates."""

    seed: int
    jobs: int = 20
    hours: float = 1
    faults: tuple[tuple[str, float], ...] = ()

    def violations(self) -> set[str]:
        rates = FaultRates(**dict(self.faults)) if self.faults else FaultRates()
        report = run_chaos(ChaosConfig(seed=self.seed, jobs=self.jobs, hours=self.hours, faults=rates))
        return {v.split(" ", 1)[0] for v in report.invariant_violations}


@dataclass(frozen=True)
class Explore:
    """An explorer set at k preemptions, stopped at its first violation."""

    actor_set: str
    k: int
    ignore: frozenset[str] = field(default_factory=frozenset)  # known bugs (xfail elsewhere)

    def violations(self) -> set[str]:
        found = explore(ACTOR_SETS[self.actor_set], k=self.k, stop_on_first=True)
        return {v.check for v in found.violations} - self.ignore


Catcher = Chaos | Explore
STALL = (("worker_stall", 0.3), ("heartbeat_races_recovery", 1.0))
ZOMBIE = (("zombie_worker", 0.3), ("worker_crash_mid_handler", 0.1))

# Each part, the smallest catcher known, and the violation it reports once the part is off.
CATCHERS: dict[str, tuple[Catcher, str]] = {
    "_advance:_state_unchanged": (Chaos(seed=2), "overlap_violated"),
    "claim_ops:_run_is_new": (Explore("backfill-tick", 3), "stale_message_link"),
    "settle_ops:_state_unchanged": (Explore("manual-detector", 3), "unreachable_run"),
    "settle_ops:_run_is_new": (Chaos(seed=2), "record_overwritten"),
    "adhoc_run_ops:_run_is_new": (Chaos(seed=5), "duplicate_commit"),
    "_join_chain:_state_as_read": (Explore("tick-manual", 3), "unreachable_run"),
    "register_ops:_state_as_read": (Explore("tick-retime-earlier", 1), "record_beyond_position"),
    "report_op:job_id": (Explore("report-delete", 2), "deleted_job_recreated"),
    # The definition as read, whole: the pause on failure's and the delete after completion's.
    "definition_as_read:*": (Explore("pause-edit", 2), "pause_over_edit"),
    "delete_after_completion_ops:_state_unchanged": (
        Explore("completion-manual", 1),
        "deleted_before_complete",
    ),
    "start_op:overtaken_by": (Explore("tick-manual", 3), "overlap"),
    "start_op:_not_asked_to_stop": (Explore("detector-worker-cancel_other", 3), "stopped_run_restarted"),
    "recover_op:_not_asked_to_stop": (
        Chaos(seed=5, faults=(("worker_crash_mid_handler", 0.3), ("cancel_races_recovery", 1.0))),
        "cancelled_run_redispatched",
    ),
    # A duplicated delivery's second start lands after the first moved the token. Targeted (every
    # seed 1-5 catches it): the default rates reached it only by luck of the seed, lost once the
    # registrar's reads changed the fault sequence (51f9ff0).
    "start_op:_run_token": (Chaos(seed=2, faults=(("sqs_duplicate", 0.3),)), "token_decreased"),
    "finish_ops:_run_token": (Chaos(seed=5, faults=ZOMBIE), "fenced_out_commit"),
    "recover_op:_lease_as_read": (Chaos(seed=5, faults=STALL), "live_lease_recovered"),
    "retire_definition_op:definition": (Chaos(seed=1), "snapshot_overwritten"),
    # A late stream record's redate (issue 34 item 4): a claim between its read and its write; a
    # backfill's record of the instant it settles; a stale message's walk parks a recovered run.
    "redate_ops:_state_unchanged": (Explore("redate-tick", 1), "unreachable_run"),
    "redate_ops:_run_is_new": (Explore("redate-backfill", 1), "record_overwritten"),
    "buffer_at_start_ops:_run_token#2": (Explore("stale-message-recovered", 1), "token_decreased"),
    # At most one run waits (buffer_one, cancel_other; walk rule W16): two runs of one chain each
    # finding their holder free of waiters. Under cancel_other the holder's token also stops the
    # second of the two (its wait moved the holder's token), so buffer_one catches the holder's part.
    "buffer_at_start_ops:_nobody_waits_behind": (
        Explore("waiting-race-cancel_other", 2),
        "more_than_one_waits",
    ),
    "buffer_at_start_ops:_holder_not_waiting": (Explore("waiting-race-buffer_one", 2), "more_than_one_waits"),
    # core/dead_letter.py (issue 38): a failed send recorded after the other payer's success.
    "dead_letter_retry_op:_letter_owed": (Explore("dead-letter-payers", 1), "dead_letter_check_at_left"),
    # A worker whose handler failed wakes after its run was recovered and started again.
    "retry_op:_run_token": (Explore("zombie-retry", 2), "token_decreased"),
    # A skip names a run unfinished since its walk (promises.md row 8): the manual run's worker read
    # 00:05 running; 00:05 ends and the manual run is redispatched before the stale skip lands.
    "skip_at_start_ops:_run_token": (Explore("workers-detector-skip", 2), "skipped_without_holder"),
    # I9, a named wait is owed its promotion (README, cancel_other: "the new run starts when it
    # ended"): 00:05's worker ends as the manual run's worker, having read it running, parks
    # the manual run behind it; nobody promotes it until its lease lapses.
    "buffer_at_start_ops:status": (Explore("workers-buffer_all", 1), "wait_behind_ended"),
    # The drain hold of a lowered ShardCount: a detector finds a canary's lease on the dropped shard
    # (the hold restarts) as an overlapping one, which read the hold as ended, lowers shard_high.
    "bookkeeping_op:version": (Explore("drain-detectors", 1), "drain_hold_cut"),
}

# Parts whose removal no chaos run or explorer set reports, and why (docs/promises.md, "Parts no
# checker catches"). Most are one of two or three parts that stop the same race: another one fails
# the write whenever this one would, so taking one away changes nothing any schedule can show.
# Every reason that says "redundant" is backed by an entry of PAIRS that names the part
# (``test_every_redundancy_is_backed_by_a_pair``).
STATE_VERSION = "redundant: every write that moves the state's position or status moves its version too"
RUN_TOKEN = "redundant: every write that changes a run's status moves its token (version) too"
MISSING = "redundant: on a missing item every comparison of the part's neighbours is false already"
FAILED_IS_FINAL = (
    "redundant with _letter_owed: dead_letter pending is written only by a run's final failure "
    "(with_dead_letter), and no write moves a failed run on (each needs it pending, running or buffered)"
)
FAILED_VERSION = (
    "redundant: no write moves a failed run's version (the debt's own writes move none), so a failed "
    "run's version as read is its version now"
)
# The settling write's: implied by its _letter_owed as the retry's are, but the race that part stops
# is harmless (its reason), so switched off together nothing is caught: no redundancy to show.
DONE_IMPLIED = (
    "implied by _letter_owed (a debt is owed only by a failed run, whose status and version no write "
    "moves), whose race is harmless: switched off with it, nothing is caught (dead-letter-payers k=2)"
)
UNCAUGHT: dict[str, str] = {
    "_advance:_next_is": STATE_VERSION,
    "_advance:_still_active": STATE_VERSION + "; and its next_is: a pause, delete, invalid item or the "
    "end removes next_run_at",
    "settle_ops:_next_is": STATE_VERSION,
    "settle_ops:_still_active": STATE_VERSION + "; and its next_is: a pause, delete, invalid item or the "
    "end removes next_run_at",
    "delete_after_completion_ops:status": STATE_VERSION,
    "start_op:_run_status": RUN_TOKEN,
    "skip_at_start_ops:_run_status": RUN_TOKEN,
    "buffer_at_start_ops:_run_status": RUN_TOKEN,
    "finish_ops:_run_status": RUN_TOKEN,
    "retry_op:_run_status": RUN_TOKEN,
    "recover_op:_run_status": RUN_TOKEN + "; and its lease part: every such write sets or removes the lease",
    "recheck_op:_run_status": "no promise breaks, with its token part too: the recheck moves check_at "
    "only, to the lease it read, so the detector looks earlier, never later (recheck_op:_run_token)",
    "recheck_buffered_ops:_run_status": RUN_TOKEN
    + "; and its lease part: every write that moves a waiting run on sets or removes its lease",
    "heartbeat_op:_run_status": RUN_TOKEN + "; and its owner part: a recovery removes the owner",
    "overtake_op:_run_status": RUN_TOKEN,
    "_rerun_missed:_run_status": RUN_TOKEN,
    "promote_op:_run_status": RUN_TOKEN,
    "start_op:run_id": MISSING,
    "definition_as_read:job_id": MISSING,
    "_rerun_missed:_run_token": "redundant with its status part: a missed record changes only through "
    "this write, which makes it pending (the pair: PAIRS)",
    "promote_op:_run_token": "redundant with its status part: its promoters (the holder's worker, the "
    "detector) call it only after their own write ended the holder, and a run whose token moved since "
    "is never buffered behind that holder again: a wait names only an unfinished holder, and an unnamed "
    "one (buffer_all) is behind a holder whose buffered_next, never removed, names another run "
    "(the pair, two promoters at once: PAIRS)",
    "recover_op:_run_token": "redundant with its lease part: every write that moves a run on sets or "
    "removes its lease",
    "heartbeat_op:_run_token": "redundant with its owner part, except when one worker host takes back "
    "its own recovered run: no explored or simulated schedule does (the pair: PAIRS)",
    "heartbeat_op:owner": "redundant with its token part: every takeover moves the token",
    "buffer_at_start_ops:any_of": "not reached: it keeps I9 (wait_unnamed: a second run written behind a "
    "holder would take the first one's name, leaving it to the detector a dispatch lease late; "
    "tests/explore/test_explorer.py::test_a_wait_that_takes_another_runs_name_is_reported), but two runs "
    "reach one holder only when the run between them passes the walk on (W6-W8), racing, which no "
    "explored set or chaos seed does",
    "buffer_at_start_ops:_run_token": "redundant: a write that moves the holder's token leaves it pending or "
    "running (its start, retry, recovery or promotion: the re-walk makes this same write at the new token) "
    "or buffered (its own wait, which W16's _holder_not_waiting refuses too; the pair: PAIRS)",
    "promote_op:blocked_by": "implied by its token part (blocked_by is written only by the run's wait and "
    "its skip, which both move its token); with the token part off too no promise breaks: a run promoted "
    "early decides again at its start (promoters-buffer_one, k=2, both off: nothing reported)",
    "recheck_op:_run_token": "no promise breaks: a stale recheck lands only on a run running again after "
    "a retry or a recovery written after the detector's read; the lease it writes was read, so it is no "
    "later than the new attempt's lease (or, at the default leases, the check_at it replaces): the "
    "detector looks no later, finds the live lease and rechecks (docs/promises.md)",
    "recheck_buffered_ops:_run_token": "redundant with its lease part: the detector acts on a lapsed lease, "
    "and every write that moves a buffered run's token (its promotion, a new wait) writes a dispatch "
    "lease from its own now, later than the lapsed one",
    "recheck_buffered_ops:_lease_as_read": "no promise breaks: with the token as read, only another "
    "detector's renewal (no token move) got in between; the stale write's premise stands (a holder's end "
    "is final, its buffered_next never changes), so it renews again or promotes a run whose holder ended",
    "overtake_op:_run_token": "no promise breaks: the mark moves no token and lands only on a run still "
    "pending, which then waits for the starter; a token that moved while the run stayed pending (its "
    "dispatch lease recovered, a promotion) leaves it not yet due, so the starter's next walk marks it "
    "all the same, and after a retry its ended attempt overlaps nothing (reached: overtake-recovered)",
    "overtake_op:overtaken_by": "unreachable: two starters passing over one run both lie after it in the "
    "chain, so the later one's walk gets past the earlier: as not yet due (it marks it: the two writes "
    "meet there), as waiting for it (the earlier one's start is refused by that mark), or finished (its "
    "mark came first, and is read); a skip's link never jumps past a run its walk passed over",
    # core/dead_letter.py (issue 38): the writes that settle a failed run's dead-letter debt.
    "dead_letter_done_op:_failed_run": DONE_IMPLIED,
    "dead_letter_retry_op:_failed_run": FAILED_IS_FINAL,
    "dead_letter_done_op:_failure_as_read": DONE_IMPLIED,
    "dead_letter_retry_op:_failure_as_read": FAILED_VERSION,
    "dead_letter_done_op:_letter_owed": "a second record of one debt comes only after its payer's own send "
    "succeeded (a second letter: at least once, deduplicated on run_id) or was refused by the same "
    "AllowedDeadLetterQueueArns: it writes the outcome the first wrote (sent over sent: only dead_letter_at "
    "moves; explorer dead-letter-payers k=2 and chaos dead_letter_jobs seed 2 report nothing)",
}


# Parts that stop one race together: each stops it by itself, so no checker catches one switched off
# alone; switched off together they are caught (the redundancy reasons in UNCAUGHT rest on this).
# Each set, the smallest catcher known, and the violation it reports.
PAIRS: dict[tuple[str, ...], tuple[Catcher, str]] = {
    ("_advance:_next_is", "_advance:_state_unchanged"): (
        Explore("tick-retime-earlier", 1),
        "lost_occurrence",
    ),
    ("_advance:_next_is", "_advance:_state_unchanged", "_advance:_still_active"): (
        Explore("pause-tick", 1),
        "claimed_while_inactive",
    ),
    ("settle_ops:_next_is", "settle_ops:_state_unchanged"): (
        Explore("manual-detector", 1),
        "unreachable_run",
    ),
    ("settle_ops:_next_is", "settle_ops:_state_unchanged", "settle_ops:_still_active"): (
        Explore("pause-detector", 1),
        "claimed_while_inactive",
    ),
    ("delete_after_completion_ops:_state_unchanged", "delete_after_completion_ops:status"): (
        Explore("completion-manual", 1),
        "deleted_before_complete",
    ),
    ("start_op:_run_status", "start_op:_run_token"): (Explore("detector-worker", 1), "duplicate_commit"),
    ("start_op:_run_status", "start_op:_run_token", "start_op:run_id"): (
        Explore("detector-worker", 1),
        "duplicate_commit",
    ),
    ("skip_at_start_ops:_run_status", "skip_at_start_ops:_run_token"): (Chaos(seed=2), "token_decreased"),
    ("buffer_at_start_ops:_run_status", "buffer_at_start_ops:_run_token#2"): (
        Explore("backfill-retry-buffer-one", 1),
        "token_decreased",
    ),
    ("finish_ops:_run_status", "finish_ops:_run_token"): (Chaos(seed=5, faults=ZOMBIE), "fenced_out_commit"),
    ("retry_op:_run_status", "retry_op:_run_token"): (Explore("zombie-retry", 2), "token_decreased"),
    ("recover_op:_lease_as_read", "recover_op:_run_status", "recover_op:_run_token"): (
        Explore("detector-worker", 1),
        "duplicate_commit",
    ),
    # Stalls twice as often as the seed-1 run that used to catch it by luck (6350fb0 shifted it):
    # every seed 1-8 catches it at 0.6.
    ("heartbeat_op:_run_token", "heartbeat_op:owner"): (
        Chaos(seed=1, faults=(("worker_stall", 0.6),)),
        "stale_heartbeat",
    ),
    ("heartbeat_op:_run_status", "heartbeat_op:_run_token", "heartbeat_op:owner"): (
        Chaos(seed=5, faults=STALL),
        "stale_heartbeat",
    ),
    ("overtake_op:_run_status", "overtake_op:_run_token"): (
        Explore("backfill-retry-buffer-one", 1),
        "waits_cycle",
    ),
    # Two promoters at once (the holder's worker, slow, and the detector): the stale promotion
    # lands on the run already promoted and started, and it runs twice.
    ("promote_op:_run_status", "promote_op:_run_token"): (
        Explore("promoters-buffer_one", 1),
        "token_decreased",
    ),
    (
        "recheck_buffered_ops:_lease_as_read",
        "recheck_buffered_ops:_run_status",
        "recheck_buffered_ops:_run_token",
    ): (Explore("promoters-buffer_one", 2), "token_decreased"),
    ("buffer_at_start_ops:_holder_not_waiting", "buffer_at_start_ops:_run_token"): (
        Explore("waiting-race-cancel_other", 2),
        "more_than_one_waits",
    ),
    # core/dead_letter.py: the retry of a failed send, recorded after the other payer's success
    (
        "dead_letter_retry_op:_failed_run",
        "dead_letter_retry_op:_failure_as_read",
        "dead_letter_retry_op:_letter_owed",
    ): (Explore("dead-letter-payers", 1), "dead_letter_check_at_left"),
    ("_rerun_missed:_run_status", "_rerun_missed:_run_token"): (
        Explore("backfills-missed", 2),
        "stale_message_link",
    ),
    ("definition_as_read:*", "definition_as_read:job_id"): (
        Explore("pause-delete", 2),
        "paused_deleted_job",
    ),
}

# Where a set's catcher needs the whole set: switched off without the parts named here (the ones
# UNCAUGHT calls redundant), the same catcher reports nothing, so those parts stop the race by
# themselves once their partners are gone: redundant, not unneeded. The other sets' catchers also
# catch the partner alone: those parts add no protection any explored or simulated schedule shows
# (docs/promises.md, "Parts no checker catches").
NEEDED: dict[tuple[str, ...], tuple[str, ...]] = {
    ("_advance:_next_is", "_advance:_state_unchanged"): ("_advance:_next_is",),
    ("_advance:_next_is", "_advance:_state_unchanged", "_advance:_still_active"): ("_advance:_still_active",),
    ("settle_ops:_next_is", "settle_ops:_state_unchanged", "settle_ops:_still_active"): (
        "settle_ops:_still_active",
    ),
    ("start_op:_run_status", "start_op:_run_token"): ("start_op:_run_status",),
    ("buffer_at_start_ops:_run_status", "buffer_at_start_ops:_run_token#2"): (
        "buffer_at_start_ops:_run_status",
    ),
    ("recover_op:_lease_as_read", "recover_op:_run_status", "recover_op:_run_token"): (
        "recover_op:_run_status",
        "recover_op:_run_token",
    ),
    ("heartbeat_op:_run_token", "heartbeat_op:owner"): ("heartbeat_op:owner",),
    ("heartbeat_op:_run_status", "heartbeat_op:_run_token", "heartbeat_op:owner"): (
        "heartbeat_op:_run_status",
    ),
    ("overtake_op:_run_status", "overtake_op:_run_token"): ("overtake_op:_run_token",),
    ("promote_op:_run_status", "promote_op:_run_token"): ("promote_op:_run_token",),
    (
        "recheck_buffered_ops:_lease_as_read",
        "recheck_buffered_ops:_run_status",
        "recheck_buffered_ops:_run_token",
    ): ("recheck_buffered_ops:_lease_as_read",),
}


def test_every_condition_part_has_a_catcher_or_a_reason() -> None:
    parts = set(condition_parts())
    assert not set(CATCHERS) & set(UNCAUGHT)
    assert sorted(parts - set(CATCHERS) - set(UNCAUGHT)) == [], "a condition part without a catcher"
    assert sorted((set(CATCHERS) | set(UNCAUGHT)) - parts) == [], "a catcher of a part that is gone"


def test_the_ledger_names_every_part() -> None:
    ledger = LEDGER.read_text()
    assert [name for name in condition_parts() if f"`{name}`" not in ledger] == []


def test_a_switch_drops_only_its_own_part() -> None:
    from jobsched.core import transitions
    from jobsched.core.run import RunStatus

    def parts(op: Any) -> list[str]:
        return [c.why for c in op.condition]

    op = transitions.heartbeat_op("j@r", 3, "me", 10, 5)
    with switched_off("heartbeat_op:owner"):
        without = transitions.heartbeat_op("j@r", 3, "me", 10, 5)
        finish = transitions.finish_ops("j@r", 3, RunStatus.RUNNING, RunStatus.FAILED, 5, _cfg())
    assert len(parts(without)) == len(parts(op))
    assert [w for w in parts(without) if w.startswith("mutant: switched off")] == [
        "mutant: switched off: heartbeat_op:owner"
    ]
    assert not any("switched off" in why for why in parts(finish))
    assert parts(transitions.heartbeat_op("j@r", 3, "me", 10, 5)) == parts(op)  # restored


def _cfg() -> Any:
    from jobsched.core.config import SchedulerConfig

    return SchedulerConfig()


@functools.cache
def baseline(catcher: Catcher) -> set[str]:
    return catcher.violations()


@pytest.mark.parametrize("name", sorted(CATCHERS))
def test_switching_a_part_off_is_caught(name: str) -> None:
    catcher, expected = CATCHERS[name]
    if isinstance(catcher, Chaos):
        assert baseline(catcher) == set()  # the same run holds with the part on
    with switched_off(name):
        found = catcher.violations()
    assert expected in found, (name, catcher, found)


def test_the_clis_switch_a_part_off_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    from jobsched_tools.cli.main import main as jobsched
    from jobsched_tools.explore.__main__ import main as explorer

    args = ["--set", "pause-edit", "-k", "2", "--traces", "0"]
    assert explorer(args) == 0
    assert explorer([*args, "--switch", "definition_as_read:*"]) == 1
    assert "pause_over_edit" in capsys.readouterr().out
    # several parts switched off together: a redundant pair (PAIRS)
    pair = ["--set", "tick-retime-earlier", "-k", "1", "--traces", "0", "--switch", "_advance:_next_is"]
    assert explorer(pair) == 0
    assert explorer([*pair, "--switch", "_advance:_state_unchanged"]) == 1
    assert "lost_occurrence" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        jobsched(["chaos", "--jobs", "2", "--hours", "0.1", "--switch", "claim_ops:no_such_part"])
    assert exit_info.value.code == 2
    assert "no condition part 'claim_ops:no_such_part'" in capsys.readouterr().err


def test_the_holders_token_only_orders_two_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``buffer_at_start_ops:_run_token`` (``cancel_other``) is reached: a manual run's worker reads
    00:05 pending as its holder, 00:05's own worker parks it behind the run before it, and the
    holder's token fails the manual run's wait (it walks again and is skipped). Without the part
    that wait lands, behind a waiting holder: what the same two writes leave in the other order
    with the part on. The explored outcomes are the same, so no checker can tell
    (docs/promises.md, "Parts no checker catches")."""
    import json

    import jobsched_tools.explore.search as search
    from jobsched.core.writes import RUNS

    finish = search._finish

    def explored() -> tuple[set[str], int]:
        outcomes: set[str] = set()
        refused = 0  # schedules where the manual run's wait failed and it walked again

        def record(world: Any, terminal: Any, skew_ms: int) -> None:
            nonlocal refused
            runs = sorted(world.inner.tables[RUNS].values(), key=lambda run: str(run["run_id"]))
            outcomes.add(json.dumps(runs, default=repr, sort_keys=True))
            writes = [line for line in world.trace if line.startswith("workerM: write")]
            refused += len(writes) > 1
            finish(world, terminal, skew_ms)

        monkeypatch.setattr(search, "_finish", record)
        found = explore(ACTOR_SETS["waiting-race-cancel_other"], k=2).violations
        assert {v.check for v in found} <= {"more_than_one_waits"}  # with both parts off
        return outcomes, refused

    with_part, refused = explored()
    with (
        switched_off("buffer_at_start_ops:_run_token"),
        switched_off("buffer_at_start_ops:_holder_not_waiting"),
    ):
        without, refused_without = explored()
    assert refused > 0 and refused_without == 0  # reached: the parts fail a wait
    assert without != with_part  # both off: the second wait lands
    with switched_off("buffer_at_start_ops:_run_token"):
        assert explored()[0] == with_part  # W16's holder part alone stops the second wait


@pytest.mark.parametrize("parts", sorted(PAIRS), ids="+".join)
def test_switching_a_redundant_pair_off_is_caught(parts: tuple[str, ...]) -> None:
    catcher, expected = PAIRS[parts]
    assert any(name in UNCAUGHT for name in parts)  # one of them is caught alone by nobody
    if isinstance(catcher, Chaos):
        assert baseline(catcher) == set()  # the same run holds with the parts on
    with switched_off(*parts):
        found = catcher.violations()
    assert expected in found, (parts, catcher, found)


def test_a_switch_reaches_the_core_modules_beyond_transitions() -> None:
    """core/dead_letter.py's parts are read and switched as core/transitions/'s are: one part of one
    write, the same helper in the other write untouched, and back after the block."""
    from jobsched.core import dead_letter

    assert dead_letter in MORE_MODULES
    run = {"run_id": "j@r", "version": 4, "status": "failed", "dead_letter": "pending"}

    def whys(op: Any) -> list[str]:
        return [c.why for c in op.condition]

    retry = dead_letter.dead_letter_retry_op(run, "unanswered", 5)
    with switched_off("dead_letter_retry_op:_letter_owed"):
        retry_off = dead_letter.dead_letter_retry_op(run, "unanswered", 5)
        done = dead_letter.dead_letter_done_op(run, dead_letter.SENT, 5)
    assert [w for w in whys(retry_off) if "switched off" in w] == [
        "mutant: switched off: dead_letter_retry_op:_letter_owed"
    ]
    assert len(whys(retry_off)) == len(whys(retry)) == 3
    assert not any("switched off" in why for why in whys(done))
    assert whys(dead_letter.dead_letter_retry_op(run, "unanswered", 5)) == whys(retry)  # restored


@pytest.mark.parametrize("parts", sorted(NEEDED), ids="+".join)
def test_a_pairs_catcher_needs_the_redundant_part(parts: tuple[str, ...]) -> None:
    catcher, expected = PAIRS[parts]
    rest = tuple(name for name in parts if name not in NEEDED[parts])
    assert rest and set(NEEDED[parts]) <= set(parts) and set(NEEDED[parts]) <= set(UNCAUGHT)
    with switched_off(*rest):
        found = catcher.violations()
    assert expected not in found, (rest, catcher, found)


def test_every_redundancy_is_backed_by_a_pair() -> None:
    redundant = {name for name, reason in UNCAUGHT.items() if "redundant" in reason}
    paired = {name for parts in PAIRS for name in parts}
    assert sorted(redundant - paired) == [], "a redundancy claimed, no pair switched off shows it"
    assert all(len(parts) > 1 and len(set(parts)) == len(parts) for parts in PAIRS)
    assert set(NEEDED) <= set(PAIRS)


def test_switching_two_parts_of_one_builder_off_switches_both() -> None:
    from jobsched.core import transitions

    def off(op: Any) -> list[str]:
        return [c.why for c in op.condition if "switched off" in c.why]

    # two ``eq`` parts of one write: both off at once (nesting two switches would leave one on)
    with switched_off("heartbeat_op:owner", "promote_op:blocked_by"):
        heartbeat = transitions.heartbeat_op("j@r", 3, "me", 10, 5)
    assert len(off(heartbeat)) == 1 and len(heartbeat.condition) == 3
    with switched_off("delete_after_completion_ops:status", "heartbeat_op:owner"):
        heartbeat = transitions.heartbeat_op("j@r", 3, "me", 10, 5)
        _, check = transitions.delete_after_completion_ops(
            {"job_id": "j", "schedule": "rate(1 hour)", "target": "t"}, {"job_id": "j", "version": 4}
        )
    assert len(off(heartbeat)) == 1 and len(off(check)) == 1
