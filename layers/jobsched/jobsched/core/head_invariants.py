"""The successor claim's invariants as code (issue 37): pure checks over a store snapshot, beside
today's ``core/invariants.py`` (which the explorer and chaos still run; a later wave switches them
to these). The rules are the build plan's (docs/proposals/successor-claim-build.md, "the plan"
below) and the executable model's (``tools/jobsched_tools/successor/invariants*.py``, "the model"):
where both say something, the model's reading is the one ported, and each check's docstring says
where it comes from.

``check`` takes the state and runs tables (items as the store holds them) and, optionally, the
work queue's message bodies and each job's ``max_runs`` life; it returns every violation, each
naming its invariant and the job or run. ``check_write`` judges one write from the runs as they
were before it and after it (and the writer's clock); its ``WriteLedger`` carries what earlier
writes did (starts, claims), so a caller that checks after every write learns what the tables
alone cannot tell.

How an item is read (§0's table, with ``core/head.py``'s helpers): its id is parsed with
``parse_run_id`` (an instant and an epoch; a legacy id is epoch 0). A **head** is a timed
occurrence (kind ``scheduled`` or ``catchup``, epoch 1 or more) in status ``scheduled`` whose
successor key (``next_key``) holds nothing; a **claimed run** is the same item once its successor
is a run or the end marker; a **closure marker** has status ``closed``, an **end marker** status
``end``; a **cancelled head** is a ``cancelled`` item of epoch 1 or more (a legacy ``cancelled``
record, epoch 0, is a record). Markers and cancelled heads are not records. Items without
``next_key`` (records written before the successor claim) are judged only by the checks that need
no successor. An id that does not parse is reported by I1' and read as no head, marker or record
by the other checks.

The write checks recognise a write by what it did to the items, not by its label: a start (a run
becomes ``running`` with a new token), a claim (an item that gains ``claimed_by``, linked to the
run whose successor key it sits at), a relink (a ``scheduled`` run whose ``after_run_id`` moved),
a redispatch (a ``scheduled`` occurrence whose token rose, nothing else moved), a settle's
decision (``settled_at`` appears on a run), a recovery (a ``running`` run's token moved by anyone
but its holder, whose writes are its commit and its retry).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobsched.core import head as head_items
from jobsched.core.dead_letter import PENDING as LETTER_OWED
from jobsched.core.head import TIMED_KINDS, is_closure_marker, is_end_marker, is_marker
from jobsched.core.invariants import Violation
from jobsched.core.run import RunIdParts, RunKind, RunStatus, parse_run_id

Item = Mapping[str, Any]

# Over the tables (``check``).
ONE_HEAD = "H1_one_head"
CLAIM_IS_SUCCESSOR = "H2_claim_is_successor"
UNCLAIMED_MESSAGE = "H2prime_unclaimed_message"
CLOSED_HEAD = "H3_closed_head"
LINK_TO_HEAD = "H4_link_to_unclaimed_head"
SUCCESSOR_WRITER = "H5prime_successor_writer"
ONE_LIVE_RECORD = "I1prime_one_live_record"
UNREACHABLE = "I3_unreachable"
MESSAGE_WITHOUT_RECORD = "I3prime_message_without_record"
BEYOND_HEAD = "I6prime_beyond_head"
BEYOND_MAX_RUNS = "runs_beyond_max"
DUE_LEFT = "finished_in_due"
ALL = (
    ONE_HEAD,
    CLAIM_IS_SUCCESSOR,
    UNCLAIMED_MESSAGE,
    CLOSED_HEAD,
    LINK_TO_HEAD,
    SUCCESSOR_WRITER,
    ONE_LIVE_RECORD,
    UNREACHABLE,
    MESSAGE_WITHOUT_RECORD,
    BEYOND_HEAD,
    BEYOND_MAX_RUNS,
    DUE_LEFT,
)

# Of a write (``check_write``).
STALE_START = "I4prime_stale_start"
STARTED_TWICE = "I4prime_started_twice"
OCCURRENCE_STARTED_TWICE = "I4prime_occurrence_started_twice"
CLOSED_STARTED = "H3_closed_started"
CLAIMED_CLOSED = "H2_claimed_closed"
ADHOC_BEHIND_CLAIMED = "adhoc_behind_claimed"
LIVE_RUN_FENCED = "live_run_fenced"
REDISPATCHED_EARLY = "redispatched_early"
RETRY_EARLY = "retry_before_backoff"
LEASE_HIDDEN = "lease_hidden"
ALL_WRITE = (
    STALE_START,
    STARTED_TWICE,
    OCCURRENCE_STARTED_TWICE,
    CLOSED_STARTED,
    CLAIMED_CLOSED,
    ADHOC_BEHIND_CLAIMED,
    LIVE_RUN_FENCED,
    REDISPATCHED_EARLY,
    RETRY_EARLY,
    LEASE_HIDDEN,
)

SCHEDULED = RunStatus.SCHEDULED.value
CLOSED = RunStatus.CLOSED.value
END = RunStatus.END.value
RUNNING = RunStatus.RUNNING.value
MISSED = RunStatus.MISSED.value
CANCELLED = RunStatus.CANCELLED.value
# A claimed occurrence past ``scheduled``: it was made a run (dispatched, started, decided at its
# start, or ended), so its successor exists (H2).
RUN_STATUSES = frozenset(
    {
        RunStatus.PENDING.value,
        RUNNING,
        RunStatus.BUFFERED.value,
        RunStatus.SUCCEEDED.value,
        RunStatus.FAILED.value,
        RunStatus.SKIPPED.value,
    }
)
# Runs that hold a turn in the chain: today's ``policies.UNFINISHED`` and ``scheduled`` (W5).
UNFINISHED = frozenset({SCHEDULED, RunStatus.PENDING.value, RUNNING, RunStatus.BUFFERED.value})
# The holder's own end of a running run (the commit): not a fence of a live run.
COMMITTED = frozenset({RunStatus.SUCCEEDED.value, RunStatus.FAILED.value, RunStatus.SKIPPED.value})
STARTABLE = frozenset({SCHEDULED, RunStatus.PENDING.value})
WALK_BOUND = 10_000


@dataclass(frozen=True)
class Life:
    """A job's ``max_runs`` and the first epoch of its current life (HC5): the runs of epochs from
    ``first_epoch`` on count (a change that raises ``max_runs`` carries the count to its epoch)."""

    max_runs: int
    first_epoch: int = 0


# --- reading the items (core/head.py's helpers, safe on ids that do not parse) -------------------


def id_parts(run_id: object) -> RunIdParts | None:
    """The parts of a run id, None if it is not one (I1' reports it)."""
    try:
        return parse_run_id(str(run_id))
    except ValueError:
        return None


def is_occurrence(run: Item) -> bool:
    return run.get("kind") in TIMED_KINDS


def is_cancelled_head(run: Item) -> bool:
    try:
        return head_items.is_cancelled_head(run)
    except ValueError:  # no epoch, and an id that does not parse
        return False


def successor(run: Item, runs: Mapping[str, Item]) -> Item | None:
    key = run.get("next_key")
    return None if key is None else runs.get(str(key))


def is_head(run: Item, runs: Mapping[str, Item]) -> bool:
    """A timed ``scheduled`` occurrence of epoch 1 or more whose successor key holds nothing (§0)."""
    try:
        return head_items.is_head(run, successor(run, runs))
    except ValueError:
        return False


def is_claimed(run: Item, runs: Mapping[str, Item]) -> bool:
    """Its successor is a run or the end marker: not nothing, not a closure marker (H2). Unlike
    ``head.is_claimed_run``, whatever the run's own status (H2 asks it of runs that started)."""
    following = successor(run, runs)
    return following is not None and not is_closure_marker(following)


def is_live_record(run: Item) -> bool:
    """A record that decides its instant (I1'): a timed id's item that is neither a marker nor a
    cancelled head (a head and a claimed run count: they hold the instant)."""
    parts = id_parts(run.get("run_id"))
    return parts is not None and parts.kind == "timed" and not is_marker(run) and not is_cancelled_head(run)


def heads(runs: Mapping[str, Item]) -> list[Item]:
    return [run for run in runs.values() if is_head(run, runs)]


def _epoch(run: Item) -> int:
    parts = id_parts(run.get("run_id"))
    return parts.epoch if parts is not None else 0


def _instant(run: Item) -> int | None:
    parts = id_parts(run.get("run_id"))
    return parts.instant_ms if parts is not None else None


def _by_job(runs: Iterable[Item]) -> dict[str, dict[str, Item]]:
    grouped: dict[str, dict[str, Item]] = {}
    for run in runs:
        parts = id_parts(run.get("run_id"))
        job_id = str(run.get("job_id") or (parts.job_id if parts is not None else ""))
        grouped.setdefault(job_id, {})[str(run["run_id"])] = run
    return grouped


def _newest_end(runs: Mapping[str, Item]) -> Item | None:
    ends = [run for run in runs.values() if is_end_marker(run)]
    return max(ends, key=_epoch) if ends else None


def _live_end(state: Item, runs: Mapping[str, Item]) -> Item | None:
    """The end marker that finishes the job's current life: of the epoch of the state's last
    change (``epoch``, head_change.py: a marker of an earlier epoch stands for an earlier life,
    and a raise of ``max_runs`` since headed the job again); without that attribute, the newest."""
    if state.get("epoch") is None:
        return _newest_end(runs)
    live = [run for run in runs.values() if is_end_marker(run) and _epoch(run) == int(state["epoch"])]
    return live[0] if live else None


# --- over the tables ------------------------------------------------------------------------------


def check(
    states: Iterable[Item],
    runs: Iterable[Item],
    messages: Iterable[Item] | None = None,
    lives: Mapping[str, Life] | None = None,
    only: Iterable[str] | None = None,
) -> list[Violation]:
    """Every violation in the tables. ``states``: the state table's job states (definition
    snapshots, whose key holds ``#``, are skipped); ``runs``: run items; ``messages``: queued
    message bodies (``RunMessage`` fields); ``lives``: per job id, its ``max_runs`` life (the
    definition holds it, not the tables); ``only``: the invariants to check (default all)."""
    wanted = frozenset(only) if only is not None else frozenset(ALL)
    by_job = _by_job(runs)
    by_id = {run_id: run for job in by_job.values() for run_id, run in job.items()}
    job_states = {str(s["job_id"]): s for s in states if "#" not in str(s.get("job_id"))}
    bodies = list(messages) if messages is not None else []
    found: list[Violation] = []
    for job_id in sorted(set(by_job) | set(job_states)):
        state, job_runs = job_states.get(job_id), by_job.get(job_id, {})
        for name, judge in _PER_JOB:
            if name in wanted:
                found += judge(job_id, state, job_runs)
        if BEYOND_MAX_RUNS in wanted and lives is not None and job_id in lives:
            found += runs_within_max(job_id, lives[job_id], job_runs)
    if bodies and UNCLAIMED_MESSAGE in wanted:
        found += unclaimed_messages(bodies, by_id)
    if bodies and LINK_TO_HEAD in wanted:
        found += message_links(bodies, by_id)
    if bodies and MESSAGE_WITHOUT_RECORD in wanted:
        found += [
            Violation(MESSAGE_WITHOUT_RECORD, str(body.get("run_id")), "a queued message names no record")
            for body in bodies
            if str(body.get("run_id")) not in by_id
        ]
    return found


def one_head(job_id: str, state: Item, runs: Mapping[str, Item]) -> list[Violation]:
    """**H1, one head** (plan §0 "head", §3 HC5; model ``H1_one_head``, ``after_end``). An active
    job has exactly one head, or none and its life's end marker (finished at once, before the
    finish write marks the state); a paused, invalid, finished or deleted job has none. An end
    marker ends its epoch: a head of its epoch or an older one beside it, or two end markers of
    one epoch, mean a claim went past the end. A timed ``scheduled`` occurrence without a
    ``next_key`` is neither a head nor a claim: no claim can ever follow it."""
    found: list[Violation] = []
    end = _newest_end(runs)
    end_epoch = _epoch(end) if end is not None else None
    finished = _live_end(state, runs)
    found_heads = heads(runs)
    stray = [h for h in found_heads if end_epoch is not None and _epoch(h) <= end_epoch]
    live = [h for h in found_heads if h not in stray]
    for beside in stray:
        found.append(
            Violation(
                ONE_HEAD, str(beside["run_id"]), f"a head beside the end marker {end and end['run_id']}"
            )
        )
    ends_per_epoch: dict[int, list[str]] = {}
    for run in runs.values():
        if is_end_marker(run):
            ends_per_epoch.setdefault(_epoch(run), []).append(str(run["run_id"]))
    for epoch, ids in sorted(ends_per_epoch.items()):
        if len(ids) > 1:
            found.append(Violation(ONE_HEAD, job_id, f"two end markers of epoch {epoch}: {sorted(ids)}"))
    active = state.get("status") == "active"
    if active and not (len(live) == 1 or (not live and finished is not None)):
        names = sorted(str(h["run_id"]) for h in live)
        found.append(
            Violation(ONE_HEAD, job_id, f"active job has {len(live)} heads {names} and no end marker")
        )
    if not active and found_heads:
        names = sorted(str(h["run_id"]) for h in found_heads)
        found.append(Violation(ONE_HEAD, job_id, f"{state.get('status')} job has heads {names}"))
    for run_id, run in sorted(runs.items()):
        if is_occurrence(run) and run.get("status") == SCHEDULED and run.get("next_key") is None:
            found.append(
                Violation(ONE_HEAD, run_id, "a scheduled occurrence without next_key: nothing claims it")
            )
    return found


def claims_are_successors(runs: Mapping[str, Item]) -> list[Violation]:
    """**H2, a claim is a successor** (plan §1 recover, §3 HC3; model ``H2_claim_is_successor``).
    An occurrence that was made a run (pending, running, buffered, or ended) has a successor that
    is a run or the end marker: never nothing (no claim made it) and never a closure marker (a
    change closed it: it is not due)."""
    found: list[Violation] = []
    for run_id, run in sorted(runs.items()):
        if not is_occurrence(run) or run.get("next_key") is None or run.get("status") not in RUN_STATUSES:
            continue
        if not is_claimed(run, runs):
            following = successor(run, runs)
            what = "nothing" if following is None else "a closure marker"
            found.append(
                Violation(CLAIM_IS_SUCCESSOR, run_id, f"{run.get('status')} with {what} as successor")
            )
    return found


def unclaimed_messages(messages: Iterable[Item], by_id: Mapping[str, Item]) -> list[Violation]:
    """**H2'** (plan §3 HC3, which worker adoption rests on; model ``H2prime_unclaimed_message``,
    and the base model's H2 for a message whose token is the run's). A queued message names a
    ``scheduled`` occurrence only once that run is claimed: the claim sends after its put landed,
    and a redispatch sends only for a claimed run. Any token: adoption would start the run with
    the run's own."""
    found: list[Violation] = []
    for body in messages:
        run = by_id.get(str(body.get("run_id")))
        if (
            run is None
            or not is_occurrence(run)
            or run.get("status") != SCHEDULED
            or run.get("next_key") is None
        ):
            continue
        if not is_claimed(run, by_id):  # a successor key names its job: the ids are global
            following = successor(run, by_id)
            what = "nothing" if following is None else "a closure marker"
            found.append(
                Violation(
                    UNCLAIMED_MESSAGE, str(run["run_id"]), f"message v{body.get('version')}, successor {what}"
                )
            )
    return found


def closed_heads(runs: Mapping[str, Item]) -> list[Violation]:
    """**H3, a closed head never runs** (plan §0 "closure marker", §1 change; model
    ``H3_closed_head``). A run whose successor is a closure marker was closed by the change (or
    the settle) that put the marker: it is ``cancelled`` or ``missed``, or a person's rerun of that
    missed record (plan §1 "rerun missed": the record becomes a ``backfill`` run, same id; chaos
    seed 1 pauses a job over its due head and a backfill then reruns it). What H3 forbids is the
    closed head running as its own claim, whose kind stays timed."""
    return [
        Violation(CLOSED_HEAD, run_id, f"{run.get('status')} behind a closure marker")
        for run_id, run in sorted(runs.items())
        if (following := successor(run, runs)) is not None
        and following.get("status") == CLOSED
        and run.get("status") not in (CANCELLED, MISSED)
        and not _rerun_of_missed(run)
    ]


def _rerun_of_missed(run: Item) -> bool:
    """A missed record a person's backfill reran in place (core/transitions/settle.py
    ``_rerun_missed``: kind ``backfill``, the record's reason kept as ``missed_reason``)."""
    return run.get("kind") == RunKind.BACKFILL.value and "missed_reason" in run


def _link_target(target_id: object, runs: Mapping[str, Item]) -> str | None:
    """Why a link to ``target_id`` is wrong, or None (H4, W10)."""
    target = runs.get(str(target_id)) if target_id is not None else None
    if target is None:
        return None
    if is_head(target, runs):
        return "an unclaimed head"
    if is_marker(target):
        return f"a{'n end' if target.get('status') == END else ' closure'} marker"
    if is_cancelled_head(target):
        return "a cancelled head"
    return None


def links(runs: Mapping[str, Item]) -> list[Violation]:
    """**H4: no ``after_run_id`` names an unclaimed head** (plan §2's walk rules, W5, W10). Runs
    join the chain before the head (the relink), and the head's successor does not exist, so a
    walk never meets an unclaimed head; markers and cancelled heads hold no turn and no run links
    to them (a change links its new head to the closed head's ``after_run_id``)."""
    found: list[Violation] = []
    for run_id, run in sorted(runs.items()):
        why = _link_target(run.get("after_run_id"), runs)
        if why is not None:
            found.append(Violation(LINK_TO_HEAD, run_id, f"after_run_id {run['after_run_id']} is {why}"))
    return found


def message_links(messages: Iterable[Item], by_id: Mapping[str, Item]) -> list[Violation]:
    """H4 for a queued message: its ``after_run_id`` is where the start's walk begins."""
    found: list[Violation] = []
    for body in messages:
        why = _link_target(body.get("after_run_id"), by_id)
        if why is not None:
            found.append(
                Violation(
                    LINK_TO_HEAD, str(body.get("run_id")), f"its message links {body['after_run_id']}, {why}"
                )
            )
    return found


def _settled(run: Item | None) -> bool:
    """A settle decided it (its ``missed`` record, or a run it kept or made: ``settled_at``)."""
    return run is not None and (run.get("status") == MISSED or "settled_at" in run)


def successor_writers(runs: Mapping[str, Item]) -> list[Violation]:
    """**H5': in a head's epoch only its claim, its settle or a change's marker writes its
    successor key** (plan §1 "advance past a record", §3 HC11). Judged from what sits there: a
    closure or end marker, a claim's item (``claimed_by``), or a settle's (a ``missed`` record, a
    run with ``settled_at``, or the next head behind a head the settle decided). Anything else (a
    backfill's record, a manual run, a head a change put at an old epoch's key) is a record the
    claim would meet, which ``advance_op`` used to step over. The successor is of its
    predecessor's epoch."""
    found: list[Violation] = []
    for run_id, run in sorted(runs.items()):
        following = successor(run, runs)
        if following is None:
            continue
        key = str(run["next_key"])
        mine, theirs = id_parts(run_id), id_parts(key)
        if mine is not None and theirs is not None and mine.epoch != theirs.epoch:
            found.append(
                Violation(SUCCESSOR_WRITER, key, f"epoch {theirs.epoch} as successor of epoch {mine.epoch}")
            )
        elif not (is_marker(following) or "claimed_by" in following or _settled(following) or _settled(run)):
            found.append(
                Violation(
                    SUCCESSOR_WRITER,
                    key,
                    f"a {following.get('kind')} {following.get('status')} item at {run_id}'s successor key, "
                    "written by neither its claim, its settle nor a change's marker",
                )
            )
    return found


def one_live_record(job_id: str, runs: Mapping[str, Item]) -> list[Violation]:
    """**I1', one live record per instant** (plan §0 "epoch keys", "one live record per instant";
    model ``one_live_record``). A timed id is ``<job>@<instant>#<epoch>`` (a legacy record: no
    epoch), the instant its item's ``scheduled_at``; a head, a claimed run or a marker always has
    an epoch; an end marker's id is ``<job>@end:<instant>#<epoch>``; a manual run's
    ``<job>@manual:<request>``. An instant holds at most one live record across every epoch:
    cancelled heads of epoch 1 or more, ``closed`` and ``end`` markers are not records."""
    found: list[Violation] = []
    per_instant: dict[int, list[str]] = {}
    for run_id, run in sorted(runs.items()):
        parts = id_parts(run_id)
        if parts is None:
            found.append(Violation(ONE_LIVE_RECORD, run_id, "not a run id"))
            continue
        why = _id_fault(job_id, run, parts)
        if why is not None:
            found.append(Violation(ONE_LIVE_RECORD, run_id, why))
        if is_live_record(run) and parts.instant_ms is not None:
            per_instant.setdefault(parts.instant_ms, []).append(run_id)
    for instant, ids in sorted(per_instant.items()):
        if len(ids) > 1:
            found.append(
                Violation(ONE_LIVE_RECORD, ids[-1], f"live records {ids} of one instant ({instant})")
            )
    return found


def _id_fault(job_id: str, run: Item, parts: RunIdParts) -> str | None:
    status, kind = run.get("status"), run.get("kind")
    if parts.job_id != job_id:
        return f"keyed under job {job_id}"
    if (kind == RunKind.MANUAL.value) != (parts.kind == "manual"):
        return f"a {kind} item at a {parts.kind} id"
    if status == END and parts.kind != "end":
        return "an end marker at a timed id"
    if parts.kind == "end" and status not in (END, CLOSED):
        return f"a {status} item at an end marker's id"
    if parts.kind == "timed" and "scheduled_at" in run and int(run["scheduled_at"]) != parts.instant_ms:
        return f"scheduled_at {run['scheduled_at']} is not its id's instant {parts.instant_ms}"
    if "epoch" in run and int(run["epoch"]) != parts.epoch:
        return f"epoch {run['epoch']} is not its id's {parts.epoch}"
    shaped = run.get("next_key") is not None or status in (SCHEDULED, CLOSED, END)
    if parts.kind != "manual" and shaped and parts.epoch < 1:
        return f"a {status} item of the successor claim at a legacy id (no epoch)"
    return None


def reachable(state: Item, runs: Mapping[str, Item]) -> list[Violation]:
    """**I3, restated** (plan §0 "where the state's attributes go", §4 core invariants; model
    ``I3_unreachable``). Every unfinished run (``scheduled``, ``pending``, ``running``,
    ``buffered``) is reachable by ``after_run_id`` from the chain's end: the head itself while the
    job has one; else its end marker's last run; else the state's ``latest_run_id``, which every
    change writes from the head it closed."""
    found_heads = heads(runs)
    end = _newest_end(runs)
    start: str | None
    if found_heads:
        start = str(min(found_heads, key=lambda h: _instant(h) or 0)["run_id"])
    elif end is not None:
        start = str(end["after_run_id"]) if end.get("after_run_id") is not None else None
    else:
        start = str(state["latest_run_id"]) if state.get("latest_run_id") is not None else None
    seen: set[str] = set()
    at = start
    while at is not None and at not in seen and at in runs and len(seen) < WALK_BOUND:
        seen.add(at)
        link = runs[at].get("after_run_id")
        at = str(link) if link is not None else None
    return [
        Violation(UNREACHABLE, run_id, f"{run.get('status')} and not reachable from {start}")
        for run_id, run in sorted(runs.items())
        if run.get("status") in UNFINISHED and run_id not in seen
    ]


def beyond_head(runs: Mapping[str, Item]) -> list[Violation]:
    """**I6', no record beyond the head but a backfill's** (plan §4 core invariants, §3 HC11;
    model ``I6_beyond_head``, ``after_end``). A claim makes the record of an occurrence as it
    moves the head past it, and a settle's records lie before the head it leaves, so no live
    occurrence record (of any epoch) lies at a later instant than the head; once the life ended,
    none after its end marker's instant. A backfill's or a manual run is not an occurrence's."""
    found_heads = heads(runs)
    end = _newest_end(runs)
    if found_heads:
        bound = min(_instant(h) or 0 for h in found_heads)
        what = f"the head {min(found_heads, key=lambda h: _instant(h) or 0)['run_id']}"
    elif end is not None:
        bound, what = _instant(end) or 0, f"the end marker {end['run_id']}"
    else:
        return []
    return [
        Violation(BEYOND_HEAD, run_id, f"{run.get('status')} beyond {what}")
        for run_id, run in sorted(runs.items())
        if is_occurrence(run) and is_live_record(run) and (_instant(run) or 0) > bound
    ]


def due_entries_left(runs: Mapping[str, Item]) -> list[Violation]:
    """**``finished_in_due``** (model ``finished_in_due``, tools/jobsched_tools/successor/
    model_reads.py). Only an unfinished run (a head, a claimed run, ``pending``, ``running``,
    ``buffered``) holds a ``due`` entry (``check_at``): every write that ends a run removes it
    (``LEASE_ATTRIBUTES``), so every sweep does not read the ended run again until its retention,
    and the detector does not judge a lease the run no longer has. The one exception: a failed
    run whose dead letter is still owed (core/dead_letter.py ``PENDING``), which the detector
    retries from there."""
    return [
        Violation(DUE_LEFT, run_id, f"{run.get('status')} with a due entry at {run['check_at']}")
        for run_id, run in sorted(runs.items())
        if "check_at" in run
        and run.get("status") not in UNFINISHED
        and not is_marker(run)
        and run.get("dead_letter") != LETTER_OWED
    ]


def life_runs(life: Life, runs: Mapping[str, Item]) -> int:
    """The runs a life made (claimed, or settled as runs): timed occurrences of its epochs that
    are runs, or ``scheduled`` and claimed. Backfills and manual runs do not count (model
    ``invariants_mis.life_runs``)."""
    return sum(
        1
        for run in runs.values()
        if is_occurrence(run)
        and run.get("next_key") is not None
        and _epoch(run) >= life.first_epoch
        and (run.get("status") in RUN_STATUSES or (run.get("status") == SCHEDULED and is_claimed(run, runs)))
    )


def runs_within_max(job_id: str, life: Life, runs: Mapping[str, Item]) -> list[Violation]:
    """**The runs of a life ≤ ``max_runs``** (plan §3 HC5; model ``runs_beyond_max``): the end
    marker fills the only key a further claim could use."""
    count = life_runs(life, runs)
    if count > life.max_runs:
        return [Violation(BEYOND_MAX_RUNS, job_id, f"{count} runs, max_runs {life.max_runs}")]
    return []


# The checks of one job's runs (and its state, None if it has none), in ``check``'s order.
_PER_JOB: tuple[tuple[str, Callable[[str, Item | None, Mapping[str, Item]], list[Violation]]], ...] = (
    (ONE_HEAD, lambda job, state, runs: one_head(job, state, runs) if state is not None else []),
    (CLAIM_IS_SUCCESSOR, lambda _job, _state, runs: claims_are_successors(runs)),
    (CLOSED_HEAD, lambda _job, _state, runs: closed_heads(runs)),
    (LINK_TO_HEAD, lambda _job, _state, runs: links(runs)),
    (SUCCESSOR_WRITER, lambda _job, _state, runs: successor_writers(runs)),
    (ONE_LIVE_RECORD, lambda job, _state, runs: one_live_record(job, runs)),
    (UNREACHABLE, lambda _job, state, runs: reachable(state, runs) if state is not None else []),
    (BEYOND_HEAD, lambda _job, _state, runs: beyond_head(runs)),
    (DUE_LEFT, lambda _job, _state, runs: due_entries_left(runs)),
)


# --- of a write -----------------------------------------------------------------------------------


@dataclass
class WriteLedger:
    """What earlier writes did, across ``check_write`` calls: the tokens each run's starts wrote,
    the runs ever started, and the runs a claim's put made claimed."""

    starts: dict[str, set[int]] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    claimed: set[str] = field(default_factory=set)


def check_write(
    before: Mapping[str, Item],
    after: Mapping[str, Item],
    now: int,
    ledger: WriteLedger,
    dispatch_lease_ms: int = 30_000,
    skew_ms: int = 2_000,
    changed: Iterable[str] | None = None,
) -> list[Violation]:
    """The checks of one write: ``before`` and ``after`` are the runs (by id) as they were before
    and after it, ``now`` the writer's clock; ``changed``: the run ids it wrote (default: every id
    whose item differs). ``dispatch_lease_ms``, ``skew_ms``: the product's dispatch lease and clock
    skew allowance (``SchedulerConfig``), which a redispatch waits for."""
    ids = (
        sorted(changed)
        if changed is not None
        else sorted(run_id for run_id in set(before) | set(after) if before.get(run_id) != after.get(run_id))
    )
    found: list[Violation] = []
    for run_id in ids:
        was, now_is = before.get(run_id), after.get(run_id)
        if now_is is None:
            continue  # removed (TTL): nothing to judge
        _note_claim(run_id, was, now_is, before, after, ledger)
        if now_is.get("status") == RUNNING and (was is None or was.get("status") != RUNNING):
            found += started(run_id, was, now_is, after, ledger)
            found += retried_early(run_id, was, now, skew_ms)
        if was is not None:
            found += live_fenced(run_id, was, now_is, now)
            found += redispatched(run_id, was, now_is, after, now, dispatch_lease_ms + skew_ms)
            found += relinked(run_id, was, now_is, after)
            found += hidden_lease(run_id, was, now_is)
    return found + claimed_closed(after, ledger)


def _note_claim(
    run_id: str,
    was: Item | None,
    now_is: Item,
    before: Mapping[str, Item],
    after: Mapping[str, Item],
    ledger: WriteLedger,
) -> None:
    """A claim's put: an item that gains ``claimed_by`` (or a new one), linked to the run whose
    successor key it sits at. That run is claimed from now on (the model's ``ledger.claimed``).
    A settle chunk that ends a life puts its end marker behind the run it decided in the same
    write (``settled_at`` appears on it): that is the settle's, not a claim."""
    if "claimed_by" not in now_is:
        return
    if was is not None and (was.get("claimed_by"), was.get("claimed_at")) == (
        now_is.get("claimed_by"),
        now_is.get("claimed_at"),
    ):
        return
    behind = now_is.get("after_run_id")
    predecessor = after.get(str(behind)) if behind is not None else None
    if predecessor is None or predecessor.get("next_key") != run_id:
        return
    if "settled_at" in predecessor and "settled_at" not in before.get(str(behind), {}):
        return
    ledger.claimed.add(str(behind))


def started(
    run_id: str, was: Item | None, now_is: Item, after: Mapping[str, Item], ledger: WriteLedger
) -> list[Violation]:
    """**I4', the execution fence** (plan §1 start; model ``I4_stale_start``, ``started_twice``,
    ``occurrence_started_twice``, ``H3_closed_started``). A start takes a run that is
    ``scheduled`` or ``pending`` from its token to the next (the message's token is the run's);
    at most one start per run version; at most one record of an instant ever starts; and a timed
    occurrence starts only claimed (its successor a run or the end marker)."""
    found: list[Violation] = []
    version = int(now_is.get("version") or 0)
    if was is None or was.get("status") not in STARTABLE or version != int(was.get("version") or 0) + 1:
        state = None if was is None else f"{was.get('status')} v{was.get('version')}"
        found.append(Violation(STALE_START, run_id, f"started to v{version} from {state}"))
    tokens = ledger.starts.setdefault(run_id, set())
    if version in tokens:
        found.append(Violation(STARTED_TWICE, run_id, f"a second start to v{version}"))
    tokens.add(version)
    parts = id_parts(run_id)
    if is_occurrence(now_is) and parts is not None and parts.kind == "timed":
        twins = sorted(
            other
            for other in ledger.started
            if other != run_id
            and (theirs := id_parts(other)) is not None
            and theirs.job_id == parts.job_id
            and theirs.kind == "timed"
            and theirs.instant_ms == parts.instant_ms
            and is_occurrence(after.get(other, {}))
        )
        if twins:
            found.append(Violation(OCCURRENCE_STARTED_TWICE, run_id, f"its instant also started as {twins}"))
        if now_is.get("next_key") is not None and not is_claimed(now_is, after):
            following = successor(now_is, after)
            found.append(
                Violation(
                    CLOSED_STARTED, run_id, f"started with successor {following and following.get('status')}"
                )
            )
    ledger.started.add(run_id)
    return found


def retried_early(run_id: str, was: Item | None, now: int, skew_ms: int) -> list[Violation]:
    """**``retry_before_backoff``** (model ``retry_before_backoff``, tools/jobsched_tools/successor/
    model_reads.py; README ``retry``). A retry (``pending`` with ``retry_at``, written by the failed
    attempt's ``retry_op``) starts only once its backoff passed: its message is delayed to
    ``retry_at``, so only a start from another message (worker adoption of a ``pending`` run, HC3's
    mutant ``adopt_pending``) starts it before. ``now`` is the starter's clock, which may lag the
    clock that wrote ``retry_at`` by the skew allowance."""
    if was is None or was.get("status") != RunStatus.PENDING.value or was.get("retry_at") is None:
        return []
    if now + skew_ms >= int(was["retry_at"]):
        return []
    return [Violation(RETRY_EARLY, run_id, f"started at {now}, its backoff ends at {was['retry_at']}")]


def hidden_lease(run_id: str, was: Item, now_is: Item) -> list[Violation]:
    """**``lease_hidden``** (model ``lease_hidden``, tools/jobsched_tools/successor/model_reads.py;
    README: a dead worker's lease lapses within seconds and the miss detector recovers the run). A
    write that keys a running run's ``due`` entry (moves its ``check_at``: the detector's recheck)
    keys it at or before the run's lease's end, so the detector, sweeping below now minus the skew
    allowance, meets it within the lease plus that allowance. Judged at the write that moves
    ``check_at`` only: a start keeps the claim's ``check_at``, which another actor's clock wrote."""
    if now_is.get("status") != RUNNING or was.get("check_at") == now_is.get("check_at"):
        return []
    lease = now_is.get("lease_expires_at")
    if lease is None or (now_is.get("check_at") is not None and int(now_is["check_at"]) <= int(lease)):
        return []
    return [Violation(LEASE_HIDDEN, run_id, f"due at {now_is.get('check_at')}, leased to {lease}")]


def live_fenced(run_id: str, was: Item, now_is: Item, now: int) -> list[Violation]:
    """**``live_run_fenced``** (model; plan §1 recover, heartbeat). A running run's token changes
    only by its holder's end (the commit, or its retry: the next attempt) or by its recovery once
    its lease ran out: a healthy run is never fenced out of its commit."""
    if was.get("status") != RUNNING or was.get("version") == now_is.get("version"):
        return []
    recovered = int(now_is.get("recoveries") or 0) != int(was.get("recoveries") or 0)
    if not recovered and now_is.get("status") in COMMITTED:
        return []  # its commit
    retry = (
        not recovered
        and now_is.get("status") == RunStatus.PENDING.value
        and "attempt" in was
        and int(now_is.get("attempt") or 0) == int(was["attempt"]) + 1
    )
    if retry:
        return []
    lease = was.get("lease_expires_at", was.get("check_at"))
    if now_is.get("status") != RUNNING and lease is not None and now >= int(lease):
        return []  # its recovery past its lease
    return [
        Violation(
            LIVE_RUN_FENCED,
            run_id,
            f"token {was.get('version')} -> {now_is.get('version')} ({now_is.get('status')}) "
            f"at {now}, leased to {lease}",
        )
    ]


def redispatched(
    run_id: str, was: Item, now_is: Item, after: Mapping[str, Item], now: int, wait_ms: int
) -> list[Violation]:
    """**``redispatched_early``** (model; plan §3 HC7). The redispatch of a claimed ``scheduled``
    occurrence (a new token, nothing else of its place moved) comes only once its claim's
    dispatch lease and the skew allowance passed: its successor carries ``claimed_at``. (HC7's
    start window is not judged: unexplored.)"""
    moved = (
        was.get("status") == SCHEDULED
        and now_is.get("status") == SCHEDULED
        and is_occurrence(now_is)
        and int(now_is.get("version") or 0) > int(was.get("version") or 0)
        and was.get("after_run_id") == now_is.get("after_run_id")
        and was.get("settled_at") == now_is.get("settled_at")
    )
    if not moved:
        return []
    following = successor(now_is, after)
    if following is None or "claimed_at" not in following:
        what = following and following.get("status")
        return [Violation(REDISPATCHED_EARLY, run_id, f"redispatched with successor {what}")]
    if now < int(following["claimed_at"]) + wait_ms:
        return [
            Violation(
                REDISPATCHED_EARLY, run_id, f"redispatched at {now}, claimed at {following['claimed_at']}"
            )
        ]
    return []


def relinked(run_id: str, was: Item, now_is: Item, after: Mapping[str, Item]) -> list[Violation]:
    """**``adhoc_behind_claimed``** (model; plan §1 ad-hoc run, §3 HC3). An ad-hoc run or a
    backfill joins the chain by relinking the head; relinking a claimed run would put the new run
    ahead of a run already dispatched (the ConditionCheck at the head's successor key stops it)."""
    if was.get("status") != SCHEDULED or now_is.get("status") != SCHEDULED:
        return []
    if was.get("after_run_id") == now_is.get("after_run_id") or now_is.get("next_key") is None:
        return []
    if successor(now_is, after) is not None:
        return [Violation(ADHOC_BEHIND_CLAIMED, run_id, "relinked while claimed: a run joined ahead of it")]
    return []


def claimed_closed(after: Mapping[str, Item], ledger: WriteLedger) -> list[Violation]:
    """**``H2_claimed_closed``** (model ``H2_claimed_closed``, ``late_run_claimed``; plan §3 HC9).
    A run a claim's put made claimed is the claim's: no settle or change decides it after
    (``missed``, ``cancelled``, or a settle's ``settled_at``)."""
    found: list[Violation] = []
    for run_id in sorted(ledger.claimed):
        run = after.get(run_id)
        if run is not None and (run.get("status") in (MISSED, CANCELLED) or "settled_at" in run):
            found.append(Violation(CLAIMED_CLOSED, run_id, f"claimed, then {run.get('status')}"))
    return found
