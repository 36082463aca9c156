"""The head item of the successor claim (shape f; docs/proposals/successor-claim-build.md §0).

A job's **head** is its next occurrence, written one occurrence ahead as a run item at
``<job>@<instant>#<epoch>`` with status ``scheduled``. It carries everything a claim needs, so the
trigger claims it from its ``due`` index entry alone: the next occurrence's instant and key
(``next_at``, ``next_key``), the job's timing, misfire policy, definition digest, overlap policy and
attempts, the last occurrence decided before it (``through``), the life's count (``runs_before``)
and the chain's end (``after_run_id``). Claiming the head N is one ``PutItem`` of N+1 at N's
``next_key`` (``transitions/head_claim.py``): once N's successor exists, N is a **claimed run**,
though no write touched N itself.

The items at an occurrence key, told apart by ``status``, ``kind`` and ``epoch`` (§0's table):

- head or claimed run: ``scheduled``, a timed kind, epoch ≥ 1 (its successor says which);
- run or record: ``pending`` ... ``missed`` as today;
- cancelled head: ``cancelled`` of epoch ≥ 1 (a change closed it before its instant): not a
  record. ``cancelled`` of epoch 0 is legacy history (a record of an occurrence not run);
- closure marker (``closed``) at a closed head's ``next_key``, end marker (``end``) at
  ``end_run_id(...)``: no claim lands there.

Pure: no boto3, no environment, every time passed in. The schedule is the product's own
(``core/schedule``, read through ``core/state.state_schedule``), so cron, rate and ``at()`` timings,
``start`` and ``end`` all hold for heads as they do for today's claims. Nothing in the services
writes a head yet (the build's later wave wires it, S8).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobsched.core.clock import dt_to_ms, ms_to_dt
from jobsched.core.config import MAX_DISPATCH_LEASE_SECONDS, MIN_DISPATCH_LEASE_SECONDS, SchedulerConfig
from jobsched.core.job import JobDefinition
from jobsched.core.run import RunKind, RunStatus, end_run_id, parse_run_id, run_id_for, shard_of
from jobsched.core.schedule import Schedule
from jobsched.core.state import misfire_of, state_schedule, timing_of
from jobsched.core.writes import Item

# The kinds of run an occurrence key holds: a head is made ``scheduled``; a settle chunk's run of
# an overdue occurrence is a ``catchup``. Markers carry kind ``end`` (end marker) or none.
TIMED_KINDS = frozenset({RunKind.SCHEDULED.value, RunKind.CATCHUP.value})
# The marker statuses: items at an occurrence key that are neither runs nor records.
MARKER_STATUSES = frozenset({RunStatus.CLOSED.value, RunStatus.END.value})


@dataclass(frozen=True)
class HeadJob:
    """What a head carries of its job, so that claiming it needs no other read: the timing (the
    state's copy, ``timing_of``), the misfire policy (``misfire_of``), the definition's digest,
    the overlap policy, the attempts allowed and ``max_runs`` (its claim decides whether the next
    run is the life's last)."""

    job_id: str
    timing: Mapping[str, str]
    misfire: Mapping[str, Any]
    def_hash: str
    overlap: str
    max_attempts: int
    max_runs: int | None = None

    @classmethod
    def of_definition(cls, definition: JobDefinition, def_hash: str | None = None) -> HeadJob:
        """From a job's definition (``def_hash`` defaults to its own digest)."""
        return cls(
            job_id=definition.job_id,
            timing=timing_of(definition),
            misfire=misfire_of(definition),
            def_hash=def_hash if def_hash is not None else definition.definition_hash(),
            overlap=definition.overlap.value,
            max_attempts=definition.retry.max_attempts,
            max_runs=definition.max_runs,
        )

    @classmethod
    def of_head(cls, head: Mapping[str, Any]) -> HeadJob:
        """From a head (or its ``due`` entry, which projects these attributes): what the head's
        claim and settle give the heads they make."""
        max_runs = head.get("max_runs")
        return cls(
            job_id=str(head["job_id"]),
            timing=dict(head["timing"]),
            misfire=dict(head.get("misfire") or {}),
            def_hash=str(head["def_hash"]),
            overlap=str(head.get("overlap", "skip")),
            max_attempts=int(head.get("max_attempts", 3)),
            max_runs=None if max_runs is None else int(max_runs),
        )

    def schedule(self) -> Schedule:
        return state_schedule({"timing": dict(self.timing)})

    def next_after(self, instant: int) -> int | None:
        """The timing's first occurrence strictly after ``instant`` (ms), or None: none left
        (an ``at()`` that passed, an ``end`` reached)."""
        found = self.schedule().next_after(ms_to_dt(instant))
        return None if found is None else dt_to_ms(found)


def counts_runs(job: HeadJob | Mapping[str, Any]) -> bool:
    """Whether the job's life counts its scheduled runs (``max_runs`` set), as today's claim
    counts ``runs_claimed`` only then: a ``max_runs`` added later counts from that change on."""
    max_runs = job.max_runs if isinstance(job, HeadJob) else job.get("max_runs")
    return max_runs is not None


def last_of_life(job: HeadJob, next_at: int | None, runs_before: int) -> bool:
    """Whether the run of a head with ``runs_before`` runs before it is its life's last: the
    timing has no next occurrence, or the run reaches ``max_runs``."""
    if next_at is None:
        return True
    return job.max_runs is not None and runs_before + 1 >= job.max_runs


def successor_of(job: HeadJob, at: int, epoch: int, runs_before: int) -> tuple[int | None, str]:
    """A head's ``next_at`` and ``next_key``: the next occurrence's instant and id in the same
    epoch, or (None, the end marker's id) when the head's run is its life's last (HC5)."""
    next_at = job.next_after(at)
    if last_of_life(job, next_at, runs_before):
        return None, end_run_id(job.job_id, at, epoch)
    assert next_at is not None
    return next_at, run_id_for(job.job_id, next_at, epoch)


def head_check_delay_ms(cfg: SchedulerConfig) -> int:
    """How long after its instant a head enters the detector's sweep (§0 "The due index", HC7):
    the stack's dispatch lease (``DispatchLeaseSeconds``), the same lease today's claim gives a
    claimed run from its start (``claim_ops``: ``max(start, now)`` + the dispatch lease). A head
    keeps its entry through its claim and its start (no write moves it), so this is when the
    detector first meets a claimed run whose message was lost or whose worker died before its
    first heartbeat: at its instant plus the dispatch lease plus the skew allowance, as today's
    lease index meets it, whatever the lease is set to (issue 37: "recovery of a crashed run
    within a lease plus the skew allowance"). A fixed delay longer than the lease recovered such
    a run that much later. The cost is today's: a run still unfinished at the delay is met once
    and rechecked (2 units), as today's run is at its dispatch lease; a start window's offset is
    one recheck more (HC8), which today's claim folds into its lease.

    Heads keep the ``check_at`` they were written with when the parameter changes (no write
    re-keys them): a claim, a settle or a change gives the next head the new delay. No reader
    takes ``check_at - scheduled_at`` for this delay (``is_head_entry``), so a head written under
    an older setting is claimed, judged and settled as any other (the detector meets it at its
    own ``check_at``; the trigger finds it by its instant, ``MAX_HEAD_CHECK_DELAY_MS``)."""
    return cfg.dispatch_lease_seconds * 1000


# The delays a head can have been written with: the dispatch lease's bounds
# (``SchedulerConfig.dispatch_lease_seconds``, ``DispatchLeaseSeconds``' MinValue and MaxValue).
MAX_HEAD_CHECK_DELAY_MS = MAX_DISPATCH_LEASE_SECONDS * 1000
MIN_HEAD_CHECK_DELAY_MS = MIN_DISPATCH_LEASE_SECONDS * 1000


def head_check_at(at: int, cfg: SchedulerConfig) -> int:
    """A head's ``due`` entry sort key: its instant plus the stack's ``head_check_delay_ms`` (HC7)."""
    return at + head_check_delay_ms(cfg)


def is_head_entry(entry: Mapping[str, Any]) -> bool:
    """A ``due`` entry that may be an unclaimed head (§0 "The due index"): a timed occurrence of an
    epoch with a successor key whose ``check_at`` is a head's, its instant plus a delay that some
    ``DispatchLeaseSeconds`` gives (a whole number of seconds, 5 to ``MAX_HEAD_CHECK_DELAY_MS``).
    The delay a head was written with is not known to its reader (the parameter may have changed
    since), so any is taken: no head is ever passed over. The index projects no ``status``: a
    claimed run looks the same until a write moves its ``check_at``, and the successor's read
    tells the two apart (one GetItem). A moved entry (a recheck's or a redispatch's lease end, a
    renewed lease, a retry) is keyed from a clock or a start window in milliseconds, so it is
    taken here only when that lands on a whole second after the instant (about one in a
    thousand), which costs that one GetItem and decides nothing."""
    if entry.get("kind") not in TIMED_KINDS or "next_key" not in entry or "scheduled_at" not in entry:
        return False
    if epoch_of(entry) < 1 or entry.get("check_at") is None:
        return False
    delay = int(entry["check_at"]) - int(entry["scheduled_at"])
    return MIN_HEAD_CHECK_DELAY_MS <= delay <= MAX_HEAD_CHECK_DELAY_MS and delay % 1000 == 0


def head_item(
    job: HeadJob,
    at: int,
    epoch: int,
    *,
    through: int,
    shard_count: int,
    check_delay_ms: int,
    runs_before: int = 0,
    after_run_id: str | None = None,
    catchups: int | None = None,
    claimed_by: str | None = None,
    claimed_at: int | None = None,
    kind: RunKind = RunKind.SCHEDULED,
) -> Item:
    """The head of ``job`` for its occurrence at ``at`` in ``epoch`` (§0, "The claim, exactly").

    ``check_delay_ms``: the stack's ``head_check_delay_ms`` (its ``due`` entry's ``check_at`` is
    ``at`` plus it);
    ``through``: the instant of the last occurrence decided (claimed or settled) before this one;
    ``runs_before``: the life's scheduled runs before it (counted only under ``max_runs``);
    ``after_run_id``: the chain's end it joins behind (None: the first run of its job);
    ``catchups``: the outage's catch-up runs so far (a settle chunk's head only);
    ``claimed_by``/``claimed_at``: who made it and when, when a claim made it (the claim of its
    predecessor): the time its predecessor was claimed (HC7, HC8).

    ``version`` and ``head_version`` start equal (1): start and heartbeat never write
    ``head_version``, so they never write the ``due`` index's projection. Absent values are left
    out, not written as null. A head carries no ``expires_at``: it is not history yet."""
    next_at, next_key = successor_of(job, at, epoch, runs_before)
    run_id = run_id_for(job.job_id, at, epoch)
    item: Item = {
        "job_id": job.job_id,
        "run_id": run_id,
        "status": RunStatus.SCHEDULED.value,
        "kind": kind.value,
        "version": 1,
        "head_version": 1,
        "attempt": 1,
        "recoveries": 0,
        "scheduled_at": at,
        "epoch": epoch,
        "next_key": next_key,
        "timing": dict(job.timing),
        "misfire": dict(job.misfire),
        "def_hash": job.def_hash,
        "overlap": job.overlap,
        "max_attempts": job.max_attempts,
        "through": through,
        "runs_before": runs_before,
        "lease_shard": shard_of(run_id, shard_count),
        "check_at": at + check_delay_ms,
    }
    optional: dict[str, Any] = {
        "next_at": next_at,
        "max_runs": job.max_runs,
        "catchups": catchups,
        "after_run_id": after_run_id,
        "claimed_by": claimed_by,
        "claimed_at": claimed_at,
    }
    item.update({name: value for name, value in optional.items() if value is not None})
    return item


def next_key(head: Mapping[str, Any]) -> str:
    """The successor key of a head: where its claim (or its settle's first put, or a change's
    closure marker) lands."""
    return str(head["next_key"])


def ends_life(head: Mapping[str, Any]) -> bool:
    """The head's successor key is its life's end marker: its claim writes the marker, no head."""
    return parse_run_id(next_key(head)).kind == "end"


def epoch_of(item: Mapping[str, Any]) -> int:
    """An item's epoch: its own ``epoch`` attribute, else its run id's (0 for a legacy id)."""
    if item.get("epoch") is not None:
        return int(item["epoch"])
    return parse_run_id(str(item["run_id"])).epoch


def is_marker(item: Mapping[str, Any]) -> bool:
    """A closure marker or an end marker: no run, no record; only a key filled."""
    return item.get("status") in MARKER_STATUSES


def is_closure_marker(item: Mapping[str, Any]) -> bool:
    return item.get("status") == RunStatus.CLOSED.value


def is_end_marker(item: Mapping[str, Any]) -> bool:
    return item.get("status") == RunStatus.END.value


def is_cancelled_head(item: Mapping[str, Any]) -> bool:
    """A head a change closed before its instant: not a record (its occurrence was not due under
    its timing). A ``cancelled`` item of epoch 0 is legacy history, a record of an occurrence not
    run (``run.NOT_RUN``)."""
    if item.get("status") != RunStatus.CANCELLED.value:
        return False
    try:
        return epoch_of(item) >= 1
    except ValueError:
        # An id that does not parse stays a record of its own: no reader drops an item it cannot
        # read (core/occurrences.py), and none fails on it.
        return False


def is_unstarted_occurrence(item: Mapping[str, Any]) -> bool:
    """A head or a claimed run: a timed occurrence of epoch ≥ 1, still ``scheduled``. Which of the
    two, only its successor key says (``is_head``, ``is_claimed_run``)."""
    return (
        item.get("status") == RunStatus.SCHEDULED.value
        and item.get("kind") in TIMED_KINDS
        and "next_key" in item
        and epoch_of(item) >= 1
    )


def is_head(item: Mapping[str, Any], successor: Mapping[str, Any] | None) -> bool:
    """``item`` is its job's head: unstarted, and nothing at its successor key."""
    return is_unstarted_occurrence(item) and successor is None


def is_claimed_run(item: Mapping[str, Any], successor: Mapping[str, Any] | None) -> bool:
    """``item`` is a claimed run not yet started: its successor key holds a run (a head, a
    record) or its life's end marker. A closure marker there means a change closed it (HC7)."""
    return is_unstarted_occurrence(item) and successor is not None and not is_closure_marker(successor)


def is_record(item: Mapping[str, Any]) -> bool:
    """A run or a record of an occurrence (what history shows): not a marker, not a cancelled head."""
    return not is_marker(item) and not is_cancelled_head(item)
