"""Shape f's invariants (docs/proposals/fewer-write-units.md, "Before it is built"), as checks over
the tables, of a write, and of the world once driven to quiescence.

Over the tables, after every write:

- ``H1_one_head``: an active job has exactly one head (a timed ``scheduled`` run whose successor
  key holds nothing); a paused or deleted job has none;
- ``H2_claim_is_successor``: a timed run that started, or that a queued message can start, has a
  successor that is a run, never a closure marker and never nothing;
- ``H3_closed_head``: a run whose successor is a closure marker is closed (cancelled or missed);
- ``I6_beyond_head``: no timed ``scheduled`` record lies beyond the head (a later instant);
- ``I3_unreachable``: every unfinished run is reachable from the head (or, for a paused job,
  from the chain end its change recorded) by ``after_run_id``.

Of a write: ``I4_stale_start`` (a start by a message whose token is not the run's, or of a run
not scheduled), ``started_twice`` (a run started again without a recovery between) and
``occurrence_started_twice`` (two records of one instant both started), ``H3_closed_started``;
``committed_twice`` and ``stale_commit`` (a commit of a run not running: its worker was
replaced); ``H2_claimed_closed`` (a run a claim's put made claimed is later missed or
cancelled: a settle or a change took the key's decision back); ``adhoc_behind_claimed`` (an
ad-hoc run relinked a claimed run: it joins the chain ahead of a run already dispatched);
``live_run_fenced`` (a running run's token changed by anything but its commit or its recovery
past its lease); ``redispatched_early`` (a redispatch before ``claimed_at`` plus the dispatch
lease and the skew allowance).

After the drive: ``occurrence_lost`` (an occurrence due while the job was active has no
succeeded or missed record), ``unfinished_after_drive``, ``change_never_applied``,
``actor_error``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jobsched.core.writes import RUNS, Item, Update, WriteOp

from jobsched_tools.successor.ledger import Ledger
from jobsched_tools.successor.writes import (
    ACTIVE,
    CANCELLED,
    CLOSED,
    DISPATCH_LEASE_MS,
    END,
    MISSED,
    RUNNING,
    SCHEDULED,
    SKEW_MS,
    SUCCEEDED,
    TIMED,
    Timing,
)

Violation = tuple[str, str, str]
H1, H2, H3 = "H1_one_head", "H2_claim_is_successor", "H3_closed_head"
I6, I3, I4 = "I6_beyond_head", "I3_unreachable", "I4_stale_start"
TWICE, OCCURRENCE_TWICE, CLOSED_STARTED = "started_twice", "occurrence_started_twice", "H3_closed_started"
ADHOC_BEHIND, EARLY = "adhoc_behind_claimed", "redispatched_early"
COMMITTED_TWICE, STALE_COMMIT, CLAIMED_CLOSED = "committed_twice", "stale_commit", "H2_claimed_closed"
LIVE_FENCED = "live_run_fenced"
LOST, UNFINISHED, NEVER_APPLIED, ERROR = (
    "occurrence_lost",
    "unfinished_after_drive",
    "change_never_applied",
    "actor_error",
)
UNFINISHED_STATUSES = (SCHEDULED, RUNNING, "buffered")  # buffered: a run waiting (overlap policies)
# An occurrence is decided by a run that ran, a missed record, or (overlap policies) a run
# skipped for its turn or ended because a newer run asked it to stop (cancel_other).
DECIDED = frozenset({SUCCEEDED, MISSED, "skipped", "failed"})


def heads(runs: Mapping[str, Item]) -> list[Item]:
    return [
        run
        for run in runs.values()
        if run.get("kind") == TIMED and run["status"] == SCHEDULED and run["next_key"] not in runs
    ]


def check_tables(
    state: Item | None, runs: Mapping[str, Item], messages: Iterable[Mapping[str, Any]]
) -> list[Violation]:
    if state is None:
        return []
    found: list[Violation] = []
    found_heads = heads(runs)
    # A job whose life's last claim put its end marker (writes_mis.py) reads as finished: no head.
    ends = [run for run in runs.values() if run["status"] == END]
    want = 1 if state["status"] == ACTIVE and not ends else 0
    if len(found_heads) != want:
        names = sorted(str(h["run_id"]) for h in found_heads)
        found.append((H1, "j", f"{state['status']} job has {len(found_heads)} heads {names}"))
    timed = [run for run in runs.values() if run.get("kind") == TIMED]
    for run in timed:
        successor = runs.get(str(run["next_key"]))
        if run["status"] in (RUNNING, SUCCEEDED) and (successor is None or successor["status"] == CLOSED):
            found.append(
                (
                    H2,
                    str(run["run_id"]),
                    f"{run['status']} with successor {successor and successor['status']}",
                )
            )
        if (
            successor is not None
            and successor["status"] == CLOSED
            and run["status"] not in (CANCELLED, MISSED)
        ):
            found.append((H3, str(run["run_id"]), f"{run['status']} behind a closure marker"))
    for body in messages:
        queued = runs.get(str(body["run_id"]))
        if (
            queued is None
            or queued["status"] != SCHEDULED
            or queued["version"] != body["version"]
            or queued["kind"] != TIMED
        ):
            continue
        successor = runs.get(str(queued["next_key"]))
        if successor is None or successor["status"] == CLOSED:
            found.append((H2, str(queued["run_id"]), "a queued message can start a run that is not claimed"))
    if found_heads:
        head = min(found_heads, key=lambda h: int(h["at"]))
        for run in timed:
            if run["status"] == SCHEDULED and int(run["at"]) > int(head["at"]):
                found.append((I6, str(run["run_id"]), f"scheduled beyond the head {head['run_id']}"))
        found += _reachable(str(head["run_id"]), runs)
    else:
        end = ends[0].get("after_run_id") if ends else state.get("chain_end")
        found += _reachable(str(end) if end is not None else None, runs)
    return found


def _reachable(start: str | None, runs: Mapping[str, Item]) -> list[Violation]:
    seen: set[str] = set()
    at = start
    while at is not None and at not in seen and at in runs:
        seen.add(at)
        link = runs[at].get("after_run_id")
        at = str(link) if link is not None else None
    return [
        (I3, run_id, f"{run['status']} and not reachable from {start}")
        for run_id, run in runs.items()
        if run["status"] in UNFINISHED_STATUSES and run_id not in seen
    ]


def check_write(
    ops: Iterable[WriteOp], before: Mapping[str, Item], runs: Mapping[str, Item], ledger: Ledger, now: int
) -> list[Violation]:
    """The checks of one write, on the runs it changed (``before``: the runs as they were)."""
    found: list[Violation] = []
    for op in ops:
        if not isinstance(op, Update) or op.table != RUNS:
            continue
        run_id = str(op.key["run_id"])
        verb = op.label.split(" ", 1)[0]
        found += check_live(verb, op, before.get(run_id), now)
        if verb == "start":
            found += check_start(op, before.get(run_id), runs, ledger)
        elif verb == "adhoc":
            found += check_adhoc(run_id, runs)
        elif verb == "redispatch":
            found += check_redispatch(run_id, runs, now)
        elif verb == "commit":
            found += check_commit(op, before.get(run_id), ledger)
    return found + check_claimed(runs, ledger.claimed)


def check_live(verb: str, op: Update, before: Item | None, now: int) -> list[Violation]:
    """A running run's token changes only by its commit or by its recovery past its lease: a
    healthy run is never fenced out of its commit."""
    if before is None or before["status"] != RUNNING or "version" not in op.set or verb == "commit":
        return []
    if verb == "recover" and now >= int(before["check_at"]):
        return []
    return [(LIVE_FENCED, str(op.key["run_id"]), f"{verb} at {now} of a run leased to {before['check_at']}")]


def check_start(op: Update, before: Item | None, runs: Mapping[str, Item], ledger: Ledger) -> list[Violation]:
    run_id = str(op.key["run_id"])
    found: list[Violation] = []
    token = int(op.set["version"]) - 1
    if before is None or before["status"] != SCHEDULED or before["version"] != token:
        status = before and before["status"]
        version = before and before["version"]
        found.append((I4, run_id, f"started by a message of token {token}: the run was {status} v{version}"))
    if ledger.starts[run_id] > ledger.recoveries[run_id] + 1:
        found.append(
            (TWICE, run_id, f"started {ledger.starts[run_id]} times, recovered {ledger.recoveries[run_id]}")
        )
    run = runs.get(run_id)
    if run is not None and run.get("kind") == TIMED:
        successor = runs.get(str(run["next_key"]))
        if successor is None or successor["status"] == CLOSED:
            found.append(
                (CLOSED_STARTED, run_id, f"started with successor {successor and successor['status']}")
            )
        twins = [
            other
            for other, item in runs.items()
            if other != run_id
            and item.get("kind") == TIMED
            and item["at"] == run["at"]
            and ledger.starts[other]
        ]
        if twins:
            found.append((OCCURRENCE_TWICE, run_id, f"its instant also started as {twins}"))
    return found


def check_commit(op: Update, before: Item | None, ledger: Ledger) -> list[Violation]:
    """At most one commit per run, and only by the worker of its latest start (its token)."""
    run_id = str(op.key["run_id"])
    found: list[Violation] = []
    if ledger.commits[run_id] > 1:
        found.append((COMMITTED_TWICE, run_id, f"committed {ledger.commits[run_id]} times"))
    token = op.set["committed_token"]
    if before is None or before["status"] != RUNNING or before["version"] != token:
        state = before and (before["status"], before["version"])
        found.append((STALE_COMMIT, run_id, f"committed by token {token} while {state}"))
    return found


def check_claimed(runs: Mapping[str, Item], claimed: set[str]) -> list[Violation]:
    """H2's other half: a claimed run is the claim's; no settle or change closes it after."""
    return [
        (CLAIMED_CLOSED, run_id, f"claimed, then {runs[run_id]['status']}")
        for run_id in sorted(claimed)
        if run_id in runs and runs[run_id]["status"] in (MISSED, CANCELLED)
    ]


def check_adhoc(relinked: str, runs: Mapping[str, Item]) -> list[Violation]:
    run = runs.get(relinked)
    if run is not None and run.get("next_key") in runs:
        return [(ADHOC_BEHIND, relinked, "the ad-hoc run was linked ahead of a run already claimed")]
    return []


def check_redispatch(run_id: str, runs: Mapping[str, Item], now: int) -> list[Violation]:
    run = runs.get(run_id)
    if run is None or run.get("kind") != TIMED:
        return []
    successor = runs.get(str(run["next_key"]))
    if successor is None or "claimed_at" not in successor:
        return [(EARLY, run_id, f"redispatched with successor {successor and successor['status']}")]
    if now < int(successor["claimed_at"]) + DISPATCH_LEASE_MS + SKEW_MS:
        return [(EARLY, run_id, f"redispatched at {now}, claimed at {successor['claimed_at']}")]
    return []


def check_final(
    runs: Mapping[str, Item], history: list[tuple[int, str, tuple[int, int]]], window_end: int
) -> list[Violation]:
    """Every occurrence due while the job was active (after the change that made the segment,
    before the next) has a succeeded or missed record; nothing is left unfinished but the head."""
    found: list[Violation] = []
    decided: dict[int, list[str]] = {}
    for run in runs.values():
        if run.get("kind") == TIMED:
            decided.setdefault(int(run["at"]), []).append(str(run["status"]))
    for index, (begin, status, timing) in enumerate(history):
        if status != ACTIVE:
            continue
        end = history[index + 1][0] if index + 1 < len(history) else window_end + 1
        at = Timing(*timing).after(begin)
        while at < min(end, window_end + 1):
            if not DECIDED & set(decided.get(at, [])):
                found.append((LOST, str(at), f"due while active, records {decided.get(at, [])}"))
            at = Timing(*timing).after(at)
    head_ids = {str(h["run_id"]) for h in heads(runs)}
    for run_id, run in runs.items():
        if run["status"] in UNFINISHED_STATUSES and run_id not in head_ids:
            found.append((UNFINISHED, run_id, f"{run['status']} after the drive"))
    return found
