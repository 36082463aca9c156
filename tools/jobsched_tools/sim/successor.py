"""The chaos checks of a successor-shaped world (issue 37; docs/proposals/successor-claim-build.md
§4, the "chaos" row): the same promises as today's (sim/invariants.py), read from heads, markers
and epochs instead of the state's next-run entry.

- A stretch's first occurrence is the state's ``head_at`` (``StateMark.head_at``, the head the
  change made); an end marker's write ends the stretch at its instant (sim/ledger.py).
- ``nothing_lost`` counts the live records of each instant over every epoch's id (a head, a
  claimed run, a record), never a closure or end marker or a cancelled head.
- ``pointers`` is H1 (one head, or none and the life's end marker) and H5' (only a head's claim,
  its settle or a change's marker writes its successor key), with the other table checks of
  core/head_invariants.py (H2-H4, I1', I3', I6'); I4' and the other write checks run after every
  write (``SuccessorLedger``).
- ``seen``'s ``record_created_twice`` is per instant (the ledger's ``live_at``), not per id.
- ``converged`` wants every job successor-shaped (the switch was on before the first job
  registered: no state keeps a next-run entry) and reads "active, no head, end marker" as
  finished (H1: the claim of a life's last head finishes the job before the finish write).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any

from jobsched.core import head_invariants
from jobsched.core.head import is_end_marker
from jobsched.core.head_change import EPOCH
from jobsched.core.job import definition_digest, is_job_id
from jobsched.core.run import parse_run_id
from jobsched.core.state import INDEX_ATTRIBUTES, JobStatus, differences
from jobsched.core.writes import JOBS
from jobsched.services.completion import asks_delete

from jobsched_tools.sim.invariants import NEVER, Checker, Segment, all_items, occurrences
from jobsched_tools.sim.ledger import UNFINISHED_STATUSES

# The table checks core/head_invariants.py makes here (``pointers``); the write checks (I4' ...)
# run after every write (sim/ledger.py ``_check_head_write``).
TABLE_CHECKS = (
    head_invariants.ONE_HEAD,
    head_invariants.CLAIM_IS_SUCCESSOR,
    head_invariants.UNCLAIMED_MESSAGE,
    head_invariants.CLOSED_HEAD,
    head_invariants.LINK_TO_HEAD,
    head_invariants.SUCCESSOR_WRITER,
    head_invariants.ONE_LIVE_RECORD,
    head_invariants.UNREACHABLE,
    head_invariants.MESSAGE_WITHOUT_RECORD,
    head_invariants.BEYOND_HEAD,
)


def live_records(runs: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, int], list[str]]:
    """The live records of each (job, instant), over every epoch's id (``is_live_record``)."""
    found: dict[tuple[str, int], list[str]] = {}
    for run_id, run in runs.items():
        parts = head_invariants.id_parts(run_id)
        if parts is None or parts.kind != "timed" or parts.instant_ms is None:
            continue
        if head_invariants.is_live_record(run):
            found.setdefault((parts.job_id, parts.instant_ms), []).append(run_id)
    return found


def finished_at_once(state: Mapping[str, Any] | None, job_runs: Mapping[str, Mapping[str, Any]]) -> bool:
    """H1's "active, no head, end marker": the claim of the life's last head put the end marker,
    and the finish write has not marked the state yet. The marker is of the state's epoch (a
    later change, a raise of ``max_runs``, begins another life)."""
    if state is None or state.get("status") != JobStatus.ACTIVE.value:
        return False
    if head_invariants.heads(job_runs):
        return False
    epoch = state.get(EPOCH)
    return any(
        is_end_marker(run) and (epoch is None or parse_run_id(str(run["run_id"])).epoch == int(epoch))
        for run in job_runs.values()
    )


class SuccessorChecker(Checker):
    """``Checker`` with the successor claim's reading of the tables (this module's docstring)."""

    @cached_property
    def live(self) -> dict[tuple[str, int], list[str]]:
        return live_records(self.runs)

    @cached_property
    def by_job(self) -> dict[str, dict[str, dict[str, Any]]]:
        grouped: dict[str, dict[str, dict[str, Any]]] = {}
        for run_id, run in self.runs.items():
            grouped.setdefault(str(run.get("job_id")), {})[run_id] = run
        return grouped

    def _live_id(self, job_id: str, instant: int) -> str | None:
        ids = self.live.get((job_id, instant), [])
        if len(ids) > 1:  # I1' reports it (pointers); here the newest epoch's decides
            return max(ids, key=lambda run_id: parse_run_id(run_id).epoch)
        return ids[0] if ids else None

    # 3. nothing lost (``Checker.nothing_lost``): an occurrence's record is its live record over
    # every epoch's id, and only live records (not a closure or end marker, not a cancelled head)
    # are held to a due instant.
    NOT_DUE = "a live record for an instant that was no due occurrence"

    def _records_held_due(self, job_id: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
        for (owner, at), ids in self.live.items():
            if owner == job_id:
                for run_id in ids:
                    yield at, run_id, self.runs[run_id]

    def _claimed_before_landing(self, job_id: str, span: Segment, ahead: int) -> set[int]:
        """The stretch's occurrences after the date of the change that ended it whose live record
        was made before that change landed: a late stream record dates a change before its write,
        and until the write lands the store reads the old timing, so a claim made in between runs
        as claimed (docs/design.md, "A change is dated when it was made"). A record made after
        the change landed (a redate's, a settle's) is held to the change's date."""
        if span.landed is None or span.landed <= span.end:
            return set()
        since = self.world.store.ledger.live_since
        return {
            at
            for at in occurrences(span.timing, span.end + 1, span.landed + ahead)
            if any(since.get(run_id, NEVER) <= span.landed for run_id in self.live.get((job_id, at), []))
        }

    # 4. H1, H5' and the rest of core/head_invariants.py's table checks.
    def pointers(self) -> None:
        states = [s for s in self.states.values() if is_job_id(str(s.get("job_id")))]
        bodies = [m.body for m in self.world.queue.messages()]
        for found in head_invariants.check(states, self.runs.values(), bodies, only=TABLE_CHECKS):
            self.violate(found.invariant, found.key, found.detail)

    # 5b. converged, the successor's way: no next-run entry left, "active, no head, end marker"
    # is finished.
    def converged(self) -> None:
        shards = self.world.sched_cfg.shard_count
        for job in all_items(self.world.store.inner, JOBS):
            job_id = str(job.get("job_id"))
            if not is_job_id(job_id):
                continue
            state = self.states.get(job_id)
            found = differences(job, state, shards)
            legacy = sorted(name for name in INDEX_ATTRIBUTES if state is not None and name in state)
            if legacy:
                found.append(f"a legacy state on a successor stack ({', '.join(legacy)})")
            if found:
                self.violate("registration_not_converged", job_id, "; ".join(found))

    def _finished(self, job: Mapping[str, Any], state: Mapping[str, Any] | None) -> bool:
        if state is None or state.get("def_hash") != definition_digest(dict(job)):
            return False
        job_runs = self.by_job.get(str(job.get("job_id")), {})
        return state.get("status") == JobStatus.FINISHED.value or finished_at_once(state, job_runs)

    def completions(self) -> None:
        self.report.deleted_after_completion = len(self.world.store.ledger.completion_deletes)
        for job in all_items(self.world.store.inner, JOBS):
            job_id = str(job.get("job_id"))
            if not is_job_id(job_id) or not asks_delete(job):
                continue
            if not self._finished(job, self.states.get(job_id)):
                continue
            if any(r.get("status") in UNFINISHED_STATUSES for r in self.runs_of(job_id)):
                continue
            self.violate("not_deleted_after_completion", job_id, "complete, its item still there")

    # 6. record_created_twice per instant: the ledger files it at the write (``_note_instants``);
    # an id created twice is still one (a manual run's id has no instant).
    def seen(self) -> None:
        ledger = self.world.store.ledger
        self.violations += ledger.seen
        for run_id, count in ledger.creations.items():
            parts = head_invariants.id_parts(run_id)
            if count > 1 and parts is not None and parts.kind == "manual":
                self.violate("record_created_twice", run_id, f"{count} writes created it")
        for event in self.world.job_errors:
            self.violate("job_error", event[0], event[1])
        self.violations += [
            ("unexpected_exception", v.split(" ", 2)[1].rstrip(":"), v) for v in self.world.unexpected
        ]
