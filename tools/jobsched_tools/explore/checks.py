"""The checks once a schedule's world was driven to quiescence (``final_checks``): a record
for every due occurrence, no record of an instant never due, one commit per run, no run left
unfinished, a manual run never skipped behind a run not due yet, a person's last word standing,
no dead letter owed.
"""

from __future__ import annotations

from dataclasses import replace

from jobsched.core.dead_letter import PENDING, REFUSED, SENT
from jobsched.core.policies import UNFINISHED
from jobsched.core.run import run_id_for
from jobsched.core.writes import JOBS, RUNS, Item

from jobsched_tools.explore.world import World
from jobsched_tools.sim.faults import StateMark
from jobsched_tools.sim.invariants import occurrences, segments

COMMITTED = ("succeeded", "failed")
POLICY = ("skipped", "missed")
ADHOC = ("manual", "backfill")


def final_checks(world: World, skew_ms: int) -> None:
    """What must hold once everything settled: a record for every due occurrence (or a change's
    withdrawal within the clock skew of it), no record of an instant that was never due, at most
    one commit per run, no run left unfinished, and a manual run never skipped behind a run that
    was not due yet."""
    runs = {str(r["run_id"]): r for r in world.inner.tables[RUNS].values()}
    for run_id, count in world.ledger.commits.items():
        if count > 1:
            world.find("duplicate_commit", run_id, f"{count} commits")
    allowed = _occurrence_records(world, runs, skew_ms)
    for run_id, run in sorted(runs.items()):
        at = int(run["scheduled_at"])
        if run.get("kind") not in ADHOC and at <= world.window_end and at not in allowed:
            world.find("run_not_due", run_id, "a record of an instant that was no due occurrence")
        if run.get("status") in UNFINISHED:
            world.find("unfinished_after_drive", run_id, f"still {run.get('status')}")
        if run.get("kind") == "manual" and run.get("status") == "skipped":
            manual_skipped_behind_future(world, run_id, run, runs, skew_ms)
    persons_last_word(world)
    check_dead_letters(world, runs)
    for actor in world.sched.actors:
        if actor.error is not None:
            world.find("unexpected_exception", actor.name, actor.error)
    for event in world.telemetry.named("job.error"):
        world.find("job_error", event.correlation_id, str(event.fields.get("error")))
    if world.extra_check is not None:
        world.extra_check(world)


def manual_skipped_behind_future(
    world: World, run_id: str, run: Item, runs: dict[str, Item], skew_ms: int
) -> None:
    """A manual run is skipped only behind a run that is due (promises.md row 11): the walk passes
    over a run not due yet by the walker's clock (``policies.not_yet_due``). The holder's instant
    and the skip's ``finished_at`` come from two actors' clocks (a manual holder's instant is its
    person's clock), which may differ by the skew the product allows
    (``SchedulerConfig.clock_skew_allowance_ms``), or by the explored offsets when those are wider
    (two clocks each ``skew_ms`` off): the skip is judged late by that much, as the lease checks
    judge expiry. An instant up to the allowance ahead is due by some clock within it."""
    holder = runs.get(str(run.get("blocked_by")), {})
    allowance = max(world.cfg.clock_skew_allowance_ms, 2 * skew_ms)
    if int(holder.get("scheduled_at", 0)) > int(run.get("finished_at", 0)) + allowance:
        world.find(
            "manual_skipped_behind_future",
            run_id,
            f"skipped behind {run.get('blocked_by')}, not due until {holder.get('scheduled_at')}",
        )


def persons_last_word(world: World) -> None:
    """A person's last write to the job item stands: a delete is not undone by jobsched's own
    writes (a report, a pause), and a paused job is never deleted (it is not complete)."""
    item = world.inner.get(JOBS, {"job_id": world.job_id})
    if world.person_last == "delete" and item is not None:
        world.find("deleted_job_recreated", world.job_id, f"the item is back: {sorted(item)}")
    if world.person_last == "pause" and item is None:
        world.find("paused_job_deleted", world.job_id, "a person paused it; jobsched deleted it")
    if world.person_last == "reput":
        # Registered again (after a delete): a new life, whose occurrences run (issue 34 item 2:
        # a max_runs count must not outlive the job item it counted for).
        scheduled = [
            r
            for r in world.inner.tables[RUNS].values()
            if r.get("kind") == "scheduled" and int(r["scheduled_at"]) > world.person_at
        ]
        if not scheduled and any(
            t > world.person_at and t <= world.window_end
            for t in occurrences(_timing(world), world.person_at, world.window_end)
        ):
            world.find("reregistered_job_never_runs", world.job_id, "no run of its new life")


def check_dead_letters(world: World, runs: dict[str, Item]) -> None:
    """Issue 38, as the chaos checker's ``dead_letters``: after the drive (whose detector pays
    every debt its lease sweep finds) nothing is still owed, every run recorded sent reached its
    queue, and no letter is for a run that did not fail. And a settled debt leaves no
    ``check_at`` (data-model.md: a finished run keeps it only while a dead letter is owed)."""
    letters = {str(letter["run_id"]) for letter in world.dead_letter_queue.sent}
    for run_id, run in sorted(runs.items()):
        owed = run.get("dead_letter")
        if owed == PENDING:
            world.find("dead_letter_owed", run_id, "its dead letter is still owed after the drive")
        elif owed == SENT and run_id not in letters:
            world.find("dead_letter_unsent", run_id, "recorded sent, but no letter reached the queue")
        if owed in (SENT, REFUSED) and "check_at" in run:
            world.find("dead_letter_check_at_left", run_id, f"settled ({owed}), it still has check_at")
    for run_id in sorted(letters):
        status = runs.get(run_id, {}).get("status")
        if status != "failed":
            world.find("dead_letter_for_unfailed", run_id, f"a letter for a {status} run")


def _timing(world: World) -> tuple[tuple[str, str], ...]:
    item = world.inner.get(JOBS, {"job_id": world.job_id}) or {}
    return tuple(sorted({"schedule": str(item.get("schedule")), "timezone": "UTC"}.items()))


def _occurrence_records(world: World, runs: dict[str, Item], skew_ms: int) -> set[int]:
    """Every occurrence that came due while the job was active (the state's history: its marks)
    has one record; returns the instants a scheduled record may have (claimed ahead, too)."""
    ahead = world.cfg.lookahead_seconds * 1000 + 2 * skew_ms + 2_000
    due: set[int] = set()
    allowed: set[int] = set()
    at_a_change: set[int] = set()
    for span in segments(dated_by_records(world), world.window_end):
        stretch = occurrences(span.timing, span.start, min(span.end, world.window_end))
        due.update(stretch)
        allowed.update(occurrences(span.timing, span.start, span.end + ahead))
        if span.end < world.window_end:
            at_a_change.update(t for t in stretch if t > span.end - skew_ms - 1_000)
    for occurrence in sorted(due):
        run_id = run_id_for(world.job_id, occurrence)
        status = runs.get(run_id, {}).get("status")
        if occurrence in at_a_change and status in (None, "cancelled"):
            continue
        if status not in COMMITTED and status not in POLICY:
            world.find("lost_occurrence", run_id, f"due, and {status or 'absent'} after the drive")
    return allowed


def dated_by_records(world: World) -> list[StateMark]:
    """The state's history, with each stretch that a person's write started dated from the write
    when its stream record was delivered (late, after the reconcile pass dated the change when it
    first saw it): the timing's occurrences after the write are due, whichever of the record and
    the pass applied the change first (issue 34 item 4; chaos's ``after_writes``); a write the pass
    applied as a timing already over (finished, a job without a head) too, up to the pass's date."""
    marks = list(world.ledger.marks)
    for written in world.records_delivered:
        for index, mark in enumerate(marks):
            after_inactive = index == 0 or marks[index - 1].status != "active"
            if mark.status == "finished" and after_inactive and mark.at >= written:
                # The pass applied the write as a timing already over (an ``at()`` job whose
                # instant its date passed: finished, nothing run). From the write it was due, up
                # to the pass's write: the stretch ends there, not at its last occurrence (which a
                # change at the stretch's end may leave unrecorded).
                due = occurrences(mark.timing, written + 1, mark.at)
                if due:
                    end = max(mark.at, int(mark.last_scheduled_at or 0))
                    opened = replace(mark, at=written, status="active", next_run_at=due[0], head_at=None)
                    marks[index : index + 1] = [opened, replace(mark, last_scheduled_at=end)]
                break
            opens = mark.status == "active" and after_inactive
            if not opens or mark.at < written or mark.next_run_at is None:
                continue
            due = occurrences(mark.timing, written + 1, int(mark.next_run_at))
            marks[index] = replace(mark, at=written, next_run_at=min([*due, int(mark.next_run_at)]))
            break
    return marks
