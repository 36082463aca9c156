"""The invariants checked after every run, from the store's run records, the effects table and
the simulation's own ledger. Each violation names its kind and its run or job, so the trace can
be filtered to it.

What is due comes from the ledger's history of each job's state item, not from the services'
bookkeeping: the stretches in which the job was active with one timing (``Segment``). Every
occurrence of that timing from the stretch's first occurrence up to its end came due while the
job was active, and must end with a record (docs/design.md, "What a change to a job does").
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from jobsched.core import invariants as core_invariants
from jobsched.core.clock import dt_to_ms, iso_z, ms_to_dt
from jobsched.core.job import (
    InvalidJob,
    JobDefinition,
    MisfirePolicy,
    OverlapPolicy,
    definition_digest,
    is_job_id,
)
from jobsched.core.policies import UNFINISHED
from jobsched.core.run import run_id_for
from jobsched.core.schedule import Schedule
from jobsched.core.state import differences, state_schedule, timing_of
from jobsched.core.transitions import BOOKKEEPING_KEY
from jobsched.core.writes import JOBS, RUNS, STATE
from jobsched.ports import Store
from jobsched.services.completion import asks_delete, finished_as_written
from jobsched.services.definitions import is_snapshot

from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.sim.faults import EFFECTS, REFUSING_DEAD_LETTER_QUEUE, StateMark
from jobsched_tools.sim.report import ChaosReport, trace_for
from jobsched_tools.sim.scenario import KNOWN_TARGETS

if TYPE_CHECKING:
    from jobsched_tools.sim.observed import ObservedWorld

COMMITTED = ("succeeded", "failed")
LINE_MOVES_WITHIN_MS = 30 * 60_000
POLICY = ("skipped", "missed")
ADHOC = ("manual", "backfill")
NEVER = 2**62


def all_items(store: Store, table: str) -> list[dict[str, Any]]:
    if isinstance(store, MemoryStore):
        return list(store.tables.get(table, {}).values())
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = store.scan(table, 1000, cursor)
        items += page.items
        if page.cursor is None:
            return items
        cursor = page.cursor


@dataclass(frozen=True)
class Segment:
    """A stretch in which a job was active with one timing: from its first occurrence ``start``
    up to ``end`` (the instant the change that ended it was applied)."""

    timing: tuple[tuple[str, str], ...]
    start: int
    opened: int
    end: int
    # When the write that ended it landed (``end`` is that change's date, which a late stream
    # record puts earlier): the store read the stretch's timing until then.
    landed: int | None = None
    # Whether a change ended it (a retime, a pause, a delete: a later mark), not its own schedule
    # (a life finished by its at(), end or max_runs: ``end`` is its last occurrence) nor the
    # window. Only a change can withdraw an occurrence due within the clock skew of it without a
    # record (``withdrawable``); a life's last occurrence has no change to withdraw it.
    by_change: bool = False


def withdrawable(span: Segment, stretch: list[int], window_end: int, margin_ms: int) -> set[int]:
    """The occurrences of ``stretch`` (the span's, up to its end) that the change which ended the
    span may have withdrawn without a record: those due within ``margin_ms`` (the clock skew, and
    a second) before it. By the clock of whoever applied the change they may not have come due
    yet. None when the span's own schedule ended it (its last occurrence must run or be recorded
    missed: nothing withdrew it) or the window did."""
    if not span.by_change or span.end >= window_end:
        return set()
    return {t for t in stretch if t > span.end - margin_ms}


def segments(marks: list[StateMark], window_end: int) -> list[Segment]:
    found: list[Segment] = []
    current: StateMark | None = None
    for mark in marks:
        if mark.status == "active" and (current is None or current.timing != mark.timing):
            if current is not None:
                found.append(_segment(current, mark.at, mark.landed, by_change=True))
            current = mark
        elif mark.status != "active" and current is not None:
            # A finished schedule has nothing after its last occurrence, whenever it was claimed;
            # a job finished by its max_runs is due up to its last record's occurrence.
            end, landed, by_change = mark.at, mark.landed, True
            if mark.status == "finished":
                end = int(mark.last_scheduled_at) if mark.last_scheduled_at is not None else window_end
                landed = None  # a life's end is its last occurrence, whenever the state says so
                by_change = False  # ... which its schedule ended: no change withdrew it
            found.append(_segment(current, end, landed, by_change))
            current = None
    if current is not None:
        found.append(_segment(current, window_end))
    return found


def _segment(mark: StateMark, end: int, landed: int | None = None, by_change: bool = False) -> Segment:
    # A successor-shaped state has no next-run entry: its stretch starts at the head its change
    # made (``head_at``, issue 37 plan §4).
    start = int(mark.next_run_at or mark.head_at or NEVER)
    return Segment(mark.timing, start, mark.at, end, landed, by_change)


@cache
def _schedule(timing: tuple[tuple[str, str], ...]) -> Schedule:
    return state_schedule({"timing": dict(timing)})


def occurrences(timing: tuple[tuple[str, str], ...], first: int, last: int) -> list[int]:
    if first > last:
        return []
    schedule = _schedule(timing)
    found = [dt_to_ms(t) for t in schedule.occurrences(ms_to_dt(first - 1), ms_to_dt(last))]
    return [t for t in found if first <= t <= last]


@dataclass
class Checker:
    world: ObservedWorld
    report: ChaosReport
    runs: dict[str, dict[str, Any]]
    states: dict[str, dict[str, Any]]
    effects: list[dict[str, Any]]
    violations: list[tuple[str, str, str]] = field(default_factory=list)
    # Per job, the instants a record may have because a person's write started the job then.
    after_write_allowed: dict[str, set[int]] = field(default_factory=dict)

    def violate(self, kind: str, key: str, detail: str) -> None:
        self.violations.append((kind, key, detail))

    # Issue 38: a run failed for good on a job with a dead-letter queue owes it its outcome, at
    # least once. After the drain nothing is still owed, every run recorded sent was sent, a
    # settled debt left no check_at, and nothing is sent for a run that did not fail.
    def dead_letters(self) -> None:
        letters = {str(letter["run_id"]) for letter in self.world.dead_letters.sent}
        for run_id, run in self.runs.items():
            owed = run.get("dead_letter")
            if owed == "pending" and int(run["scheduled_at"]) <= self.world.window_end:
                # The window's runs (as for every occurrence): runs the drain still starts may
                # fail too close to its end for their hour of refusals to run out.
                self.violate("dead_letter_owed", run_id, "its dead letter is still owed after the drain")
            elif owed == "sent" and run_id not in letters:
                self.violate("dead_letter_unsent", run_id, "recorded sent, but no letter reached the queue")
            refusing = run.get("dead_letter_queue_arn") == REFUSING_DEAD_LETTER_QUEUE
            if owed == "refused" and not (refusing and run.get("dead_letter_error")):
                # Refused only by a queue that refuses, and with the reason a person acts on.
                self.violate(
                    "dead_letter_refused_wrongly", run_id, f"refused: {run.get('dead_letter_error')!r}"
                )
            if owed == "sent" and refusing:
                self.violate("dead_letter_unsent", run_id, "recorded sent to a queue that refuses every send")
            if owed in ("sent", "refused") and run.get("check_at") is not None:
                # A settled debt leaves the lease index (data-model.md): a payer whose send failed
                # after the other payer's success must not put its look-again time back.
                self.violate("dead_letter_check_at_left", run_id, f"settled ({owed}) with a check_at left")
        for run_id in sorted(letters):
            status = (self.runs.get(run_id) or {}).get("status", "failed")
            if status != "failed":
                self.violate("dead_letter_for_unfailed", run_id, f"a letter for a {status} run")

    def _record_at(self, job_id: str, instant: int) -> dict[str, Any] | None:
        """The record of an occurrence (sim/successor.py: its live record over every epoch)."""
        run_id = self._live_id(job_id, instant)
        return None if run_id is None else self.runs[run_id]

    def runs_of(self, job_id: str) -> list[dict[str, Any]]:
        return [r for r in self.runs.values() if r["job_id"] == job_id]

    # 1. at most one commit per occurrence, and never by a fenced-out actor (the ledger).
    def commits(self) -> None:
        ledger = self.world.store.ledger
        for run_id, commits in ledger.commits.items():
            if len(commits) > 1:
                self.report.duplicate_commits += len(commits) - 1
                who = "; ".join(
                    f"{actor} token {token} at {iso_z(at - at % 1000)}" for at, actor, token, _ in commits
                )
                self.violate("duplicate_commit", run_id, f"{len(commits)} commits: {who}")
        for run_id, detail in ledger.fenced_commits:
            self.report.fenced_commits += 1
            self.violate("fenced_out_commit", run_id, detail)

    # 2. effects exactly once per succeeded run, none without one.
    def effects_once(self) -> None:
        effect_runs: Counter[str] = Counter()
        for effect in self.effects:
            effect_runs[str(effect.get("run_id") or effect["pk"])] += int(effect.get("count", 1))
        for run_id, actor in self.world.store.ledger.effect_conflicts:
            self.report.duplicate_effects += 1
            self.violate(
                "duplicate_effect", run_id, f"{actor} passed the commit fence but the effect existed"
            )
        for run_id, count in effect_runs.items():
            run = self.runs.get(run_id)
            if count > 1:
                self.report.duplicate_effects += count - 1
                self.violate("duplicate_effect", run_id, f"effect applied {count} times")
            if run is None or run.get("status") != "succeeded":
                self.violate(
                    "effect_without_success", run_id, f"run is {None if run is None else run.get('status')}"
                )
        for run in self.runs.values():
            if run.get("status") == "succeeded" and effect_runs[str(run["run_id"])] != 1:
                self.violate(
                    "success_without_effect",
                    str(run["run_id"]),
                    f"effect count {effect_runs[str(run['run_id'])]}",
                )

    # 3a. a change dated when the person wrote it (issue 34, item 4): after a write that starts a
    # timing where none ran (a new job, a resume, a fix, a re-creation), every occurrence of it
    # runs or is recorded, also when the write's stream record comes late, after the reconcile
    # pass applied the change under the date it first saw it (``stream_late``). A record lost for
    # good, or one that arrives after the person replaced the item, leaves the pass's date as the
    # only one (docs/design.md): those writes are not held to it.
    AFTER_WRITE_MS = 15 * 60_000

    def after_writes(self) -> None:
        world = self.world
        skew = world.rates.clock_skew_max_ms + 1_000
        for job_id, writes in world.person_log.items():
            before = _runnable(world.by_id[job_id].definition.to_item())  # what ran before a write
            for at, item, delivered in writes:
                written = _runnable(item)
                starts = written is not None and before is None
                before = written
                # The next write, by anyone (a pause on failure, a delete after completion too),
                # that changed the item (a re-put of the same item changes nothing).
                following = next(
                    (
                        t
                        for t, digest in world.item_history.get(job_id, [])
                        if t > at and digest != _digest(item)
                    ),
                    NEVER,
                )
                if not starts or written is None or written.max_runs is not None or delivered is None:
                    continue  # a record lost for good: the pass's date is the only one (design.md)
                timing = tuple(sorted(timing_of(written).items()))
                # A late record dates the change it carries, also when the person wrote the same
                # item again meanwhile: its timing's occurrences after the write may have records.
                horizon = min(at + self.AFTER_WRITE_MS, world.window_end) + skew
                allowed = self.after_write_allowed.setdefault(job_id, set())
                allowed.update(occurrences(timing, at + 1, horizon))
                if following <= delivered:
                    continue  # changed before its record arrived: only the pass can have applied it
                end = min(at + self.AFTER_WRITE_MS, following - skew, world.window_end)
                instants = occurrences(timing, at + 1, end)
                for instant in instants:
                    if instant <= at + skew:
                        continue  # due within the clock skew of the write: either way
                    run = self._record_at(job_id, instant)
                    if run is None or run.get("status") == "cancelled":
                        self.violate(
                            "lost_after_write",
                            run_id_for(job_id, instant),
                            f"due after a person's write at {iso_z(at - at % 1000)} that started the job, "
                            "and no record",
                        )

    # 3. every occurrence due while the job was active has exactly one record; nothing else ran.
    # One check for both claims: how it finds an occurrence's record (``_live_id``) and which
    # records it holds to a due instant (``_records_held_due``) are the world's (sim/successor.py:
    # the live record over every epoch's id, and only live records).
    def nothing_lost(self) -> None:
        world = self.world
        ahead = world.sched_cfg.lookahead_seconds * 1000 + 2 * world.rates.clock_skew_max_ms + 2_000
        skew = world.rates.clock_skew_max_ms + 1_000
        for job_id in world.by_id:
            spans = segments(world.store.ledger.states.get(job_id, []), world.window_end)
            due: set[int] = set()
            allowed: set[int] = set()
            at_a_change: set[int] = set()
            for span in spans:
                stretch = occurrences(span.timing, span.start, min(span.end, world.window_end))
                due.update(stretch)
                # Claimed ahead before the change ended the stretch: run under the old timing.
                allowed.update(occurrences(span.timing, span.start, span.end + ahead))
                allowed.update(self._claimed_before_landing(job_id, span, ahead))
                # Due by the world's clock, perhaps not yet by the clock of whoever applied the
                # change that ended the stretch (each actor's is off by up to clock_skew_max_ms):
                # the change may withdraw it (no record) as one made just before it came due: the
                # clock decides when a change takes effect, never whether a record is made twice.
                # Not a life's last occurrence (its schedule ended the stretch, no change did).
                at_a_change.update(withdrawable(span, stretch, world.window_end, skew))
            for occurrence in sorted(due):
                run_id = self._live_id(job_id, occurrence)
                status = None if run_id is None else self.runs[run_id].get("status")
                if occurrence in at_a_change and status in (None, "cancelled"):
                    self.report.withdrawn_at_a_change += 1
                    continue
                self._settled(run_id if run_id is not None else run_id_for(job_id, occurrence))
            allowed |= self.after_write_allowed.get(job_id, set())  # dated by a late record
            for at, run_id, run in self._records_held_due(job_id):
                if run.get("kind") not in ADHOC and at <= world.window_end and at not in allowed:
                    self.violate("run_not_due", run_id, self.NOT_DUE)
            if job_id not in world.operated:
                self._run_all_complete(job_id, sorted(due))

    NOT_DUE = "a run for an instant that was no due occurrence"

    def _claimed_before_landing(self, job_id: str, span: Segment, ahead: int) -> set[int]:
        """The stretch's occurrences after the date of the change that ended it whose record was
        made before that change landed: a late stream record dates a change before its write
        (the registrar function's, after an inline registrar or the reconcile pass applied an
        earlier one), and until the write lands the store reads the old stretch, so a claim made
        in between runs as claimed (docs/design.md, "A change is dated when it was made"; seed 9
        of the heavy operator worlds, tests/sim/test_chaos_claimed_before_landing.py). A record
        made by the write that landed it or after (a settle's, a redate's) is held to the change's
        date. The successor checker reads its live records over every epoch's id instead."""
        if span.landed is None or span.landed <= span.end:
            return set()
        made = self.world.store.ledger.created_at
        return {
            at
            for at in occurrences(span.timing, span.end + 1, span.landed + ahead)
            if made.get(run_id_for(job_id, at), NEVER) < span.landed
        }

    def _live_id(self, job_id: str, instant: int) -> str | None:
        """The id of an occurrence's record, None if it has none: today's id for it."""
        run_id = run_id_for(job_id, instant)
        return run_id if run_id in self.runs else None

    def _records_held_due(self, job_id: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """(instant, id, record) of each record of the job that must be of a due occurrence (or
        ad hoc): today, every record."""
        for run in self.runs_of(job_id):
            yield int(run["scheduled_at"]), str(run["run_id"]), run

    def _line_moves(self, run: dict[str, Any]) -> bool:
        """Under buffer_all, whether the job's line still moves at the drain's end: one of its
        runs finished in the last LINE_MOVES_WITHIN_MS. Every run waits for the one before it,
        so runs longer than the period leave a backlog no drain of fixed length clears; a line
        whose head waits on nothing (a liveness bug) shows no finished run and stays lost."""
        since = self.world.clock.now_ms() - LINE_MOVES_WITHIN_MS
        return any(
            int(other.get("finished_at") or 0) >= since
            for other in self.runs_of(str(run["job_id"]))
            if other.get("status") in COMMITTED + POLICY
        )

    def _settled(self, run_id: str) -> None:
        self.report.occurrences_due += 1
        found = self.runs.get(run_id)
        status = None if found is None else found.get("status")
        if status in COMMITTED:
            self.report.committed_runs += 1
            if status == "succeeded":
                self.report.succeeded_runs += 1
            else:
                self.report.failed_runs += 1
        elif status in POLICY:
            self.report.policy_misses += 1
            if not found or not found.get("reason"):
                self.violate("miss_without_reason", run_id, f"{status} with no reason")
        elif found is not None and found.get("overlap") == "buffer_all" and self._line_moves(found):
            self.report.backlogged += 1
        else:
            self.report.lost_occurrences += 1
            self.violate("lost_occurrence", run_id, f"run is {status or 'absent'} after the drain")

    def _run_all_complete(self, job_id: str, due: list[int]) -> None:
        """A run_all + allow job whose outages each held at most max_catchup occurrences (and
        that no person touched) has every occurrence committed."""
        definition = self.world.by_id[job_id].definition
        if (
            definition.misfire.policy is not MisfirePolicy.RUN_ALL
            or definition.overlap is not OverlapPolicy.ALLOW
        ):
            return
        grace = definition.misfire.grace_seconds * 1000
        worst = max(
            (sum(1 for t in due if a - grace - 120_000 <= t <= b + 120_000) for a, b in self.world.outages),
            default=0,
        )
        if worst > definition.misfire.max_catchup:
            return
        self.report.run_all_jobs_checked += 1
        committed = sum(1 for t in due if (self._record_at(job_id, t) or {}).get("status") in COMMITTED)
        if committed != len(due):
            self.violate(
                "run_all_incomplete",
                job_id,
                f"{committed} of {len(due)} occurrences committed (worst outage {worst} "
                f"<= max_catchup {definition.misfire.max_catchup})",
            )

    # 4. an active job's pointer is its timing's next occurrence after the last one recorded.
    def pointers(self) -> None:
        for job_id, state in self.states.items():
            if state.get("status") != "active":
                continue
            last = int(state.get("last_scheduled_at") or 0)
            scheduled = [
                int(r["scheduled_at"])
                for r in self.runs_of(job_id)
                if r.get("kind") not in ADHOC and r.get("status") != "cancelled"
            ]
            next_run = state.get("next_run_at")
            schedule = state_schedule(state)
            following = schedule.next_after(ms_to_dt(next_run - 1)) if next_run is not None else None
            if next_run is None or following is None or dt_to_ms(following) != next_run:
                self.violate("next_run_inconsistent", job_id, f"next_run_at {next_run} is no occurrence")
            elif next_run <= last:
                self.violate(
                    "next_run_inconsistent", job_id, f"next_run_at {iso_z(next_run)} <= last {iso_z(last)}"
                )
            elif scheduled and max(scheduled) > last:
                self.violate(
                    "next_run_inconsistent",
                    job_id,
                    f"a record at {iso_z(max(scheduled))} after last {iso_z(last)}",
                )

    # 5. no lease left expired at the end (the detector runs every minute, faults are off).
    def leases(self) -> None:
        world = self.world
        bound = world.clock.now_ms() - world.sched_cfg.clock_skew_allowance_ms - 2 * 60_000
        for run in self.runs.values():
            expires = run.get("lease_expires_at")
            if expires is not None and int(expires) < bound:
                self.violate(
                    "lease_left_expired",
                    str(run["run_id"]),
                    f"{run.get('status')}, lease expired {iso_z(int(expires))}",
                )

    # 5b. recovery within a lease plus the skew allowance (issue 37), as the simulated detector
    # (one run a minute) keeps it: no run is recovered after a clean detector run (no fault, no
    # error, not cut short) that began once its lease or dispatch lease had lapsed by more than
    # the skew allowance and the actors' clock skew. A successor head keeps its due entry through
    # its claim and start, so this fails when its check delay exceeds the leases (HC7).
    def recoveries(self) -> None:
        world = self.world
        slack = world.sched_cfg.clock_skew_allowance_ms + world.rates.clock_skew_max_ms
        sweeps = sorted(world.clean_detector_runs)
        for run_id, lapsed, recovered in world.recoveries:
            first = bisect.bisect_left(sweeps, lapsed + slack)
            # The recovering run's own clock may be ahead of the simulation's by the skew.
            if first < len(sweeps) and sweeps[first] < recovered - world.rates.clock_skew_max_ms - 1000:
                self.violate(
                    "recovery_late",
                    run_id,
                    f"lapsed {iso_z(lapsed)}, a clean detector run at {iso_z(sweeps[first])} left it, "
                    f"recovered {iso_z(recovered)}",
                )

    # 7. input at the edge: a job item keyed with a snapshot's key is reported invalid and never
    # gets a state item; every snapshot keeps its definition; no state item without a job id.
    def odd_inputs(self) -> None:
        inner = self.world.store.inner
        for item in all_items(inner, STATE):
            key = str(item["job_id"])
            if item.get("job_id") == BOOKKEEPING_KEY["job_id"]:
                continue  # the detector's own bookkeeping (its reconcile cursor, its shard span)
            if is_snapshot(item):
                if "definition" not in item:
                    self.violate(
                        "snapshot_overwritten", key, f"a snapshot without its definition: {sorted(item)}"
                    )
            elif not is_job_id(key):
                self.violate("state_without_job_id", key, "a state item keyed with no job id")
        for key in sorted(self.world.odd_keys):
            odd = inner.get(JOBS, {"job_id": key})
            if odd is None or odd.get("status") != "invalid" or not odd.get("invalid_reasons"):
                status = None if odd is None else odd.get("status")
                self.violate("odd_item_unreported", key, f"status {status}, no reasons")

    # 5b. level-triggered registration (issue 26): at the end, every job item's change has reached
    # its state, also one whose stream record was lost for good (``stream_lost``): the detector's
    # reconcile pass compares every job item with its state and applies what did not arrive.
    def converged(self) -> None:
        shards = self.world.sched_cfg.shard_count
        for job in all_items(self.world.store.inner, JOBS):
            job_id = str(job.get("job_id"))
            if not is_job_id(job_id):
                continue  # a key no job can have (odd_inputs checks its report)
            found = differences(job, self.states.get(job_id), shards)
            if found:
                self.violate("registration_not_converged", job_id, "; ".join(found))

    # 5c. delete after completion (issue 29 item 3): at the moment of each delete the ledger
    # checked the job complete (``deleted_before_complete``) and watched that none of its runs was
    # made or started while its item stayed deleted (``ran_after_deletion``; both in ``seen``;
    # ``nothing_lost`` holds every occurrence it was due). Here the liveness: at the end, no job
    # that asks for the delete is complete and still has its item: the level-triggered pass alone
    # must have deleted it.
    def completions(self) -> None:
        self.report.deleted_after_completion = len(self.world.store.ledger.completion_deletes)
        for job in all_items(self.world.store.inner, JOBS):
            job_id = str(job.get("job_id"))
            if not is_job_id(job_id) or not asks_delete(job):
                continue
            if not finished_as_written(job, self.states.get(job_id)):
                continue
            if any(r.get("status") in UNFINISHED for r in self.runs_of(job_id)):
                continue
            self.violate("not_deleted_after_completion", job_id, "complete, its item still there")

    # 6. what the ledger saw at the moment of a write: a record created twice, two slot-holding
    # runs of one job running at once, an unfinished run without a lease, a live lease recovered;
    # and every exception a service met that was not a store or queue error (one job's failure
    # the services isolated is still a bug to report).
    def seen(self) -> None:
        ledger = self.world.store.ledger
        self.violations += ledger.seen
        for run_id, count in ledger.creations.items():
            if count > 1:
                self.violate("record_created_twice", run_id, f"{count} writes created it")
        for event in self.world.job_errors:
            self.violate("job_error", event[0], event[1])
        self.violations += [
            ("unexpected_exception", v.split(" ", 2)[1].rstrip(":"), v) for v in self.world.unexpected
        ]


def _digest(item: dict[str, Any] | None) -> str | None:
    return None if item is None else definition_digest(item)


def _runnable(item: dict[str, Any] | None) -> JobDefinition | None:
    """The definition a person's item schedules (None: deleted, invalid or paused)."""
    if item is None:
        return None
    try:
        definition = JobDefinition.from_item(item)
    except InvalidJob:
        return None
    return definition if definition.enabled and definition.target in KNOWN_TARGETS else None


# Of core/invariants.py, those a successor-shaped world keeps (issue 37): the chain's own
# (tokens, walks, waits). One record per occurrence, reachability, message links and a record
# beyond the position read today's ids and next-run entry: core/head_invariants.py's I1', I3',
# H4 and I6' stand for them (sim/successor.py ``pointers``).
SUCCESSOR_CORE_INVARIANTS = (
    core_invariants.TOKEN_DECREASED,
    core_invariants.NO_WALK,
    core_invariants.SKIPPED_BUFFER_ALL,
    core_invariants.WAITS_ACYCLIC,
    core_invariants.WAIT_BEHIND_ENDED,
    core_invariants.WAIT_UNNAMED,
)


def check(world: ObservedWorld, checker_class: type[Checker] = Checker) -> ChaosReport:
    """The world's report, by ``checker_class`` (a successor-shaped world's is
    sim/successor.py's ``SuccessorChecker``: sim/world.py chooses)."""
    cfg = world.cfg
    report = ChaosReport(cfg.seed, cfg.jobs, cfg.hours, cfg.store, start=iso_z(world.start_ms))
    inner = world.store.inner
    checker = checker_class(
        world,
        report,
        runs={str(r["run_id"]): r for r in all_items(inner, RUNS)},
        states={str(s["job_id"]): s for s in all_items(inner, STATE) if not is_snapshot(s)},
        effects=all_items(inner, EFFECTS),
    )
    checker.commits()
    checker.effects_once()
    checker.after_writes()
    checker.nothing_lost()
    checker.pointers()
    checker.leases()
    checker.recoveries()
    checker.odd_inputs()
    checker.converged()
    checker.completions()
    checker.dead_letters()
    checker.seen()
    violations = checker.violations
    report.invariant_violations = [f"{kind} {key}: {detail}" for kind, key, detail in violations]
    report.violation_keys = list(dict.fromkeys(key for _, key, _ in violations))
    # core/invariants.py on the final tables and queue (every invariant), after the per-write
    # checks the store wrapper made (issue 25): each one found is a violation of the run.
    world.store.note_core(
        core_invariants.check(
            checker.states.values(),
            checker.runs.values(),
            [m.body for m in world.queue.messages()],
            world.store.ledger.tokens,
            None if not cfg.ends_successor else SUCCESSOR_CORE_INVARIANTS,
        )
    )
    report.core_invariants = dict(sorted(world.store.ledger.core.items()))
    report.core_examples = list(world.store.ledger.core_examples)
    for kind, count in report.core_invariants.items():
        example = next((e for e in report.core_examples if e.startswith(kind)), "")
        report.invariant_violations.append(f"{kind} (core/invariants.py) {count} times: {example}")
    report.leases_recovered = world.leases_recovered
    report.faults_injected = dict(sorted(world.counts.items()))
    report.outcomes = dict(sorted(world.outcomes.items()))
    if isinstance(inner, MemoryStore):
        report.store_requests = sum(inner.request_counts.values())
    if violations:
        report.trace = trace_for(world.entries, report.violation_keys)
    return report
