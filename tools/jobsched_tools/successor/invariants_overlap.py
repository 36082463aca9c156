"""The overlap policies' invariants on shape f's model (docs/design.md, I7, I8, I9 and the "never
beside" guarantee), checked after every write when the job's policy walks, and after the drive.

After every write:

- ``more_than_one_waits`` (``buffer_one``, ``cancel_other``): at most one run of the job waits;
- ``waits_cycle`` (I8): no run waits, directly or through others, for a run that waits for it
  (a buffered run for its ``blocked_by``, a run not started since it was overtaken for its
  ``overtaken_by``, while that run is unfinished);
- ``wait_unnamed`` (I9; not ``buffer_all``, whose unnamed wait is the detector's by design): a
  waiting run is named by its holder (``buffered_next``), so the holder's end promotes it;
- ``skipped_under_buffer_all`` (I7).

At a write: ``manual_behind_future`` (W3's promise: an ad-hoc run is skipped or waits only
behind a run that runs or is due; not ``buffer_all``), ``started_when_asked_to_stop``
(``cancel_other``: a run asked to stop never starts its handler again), ``overlap_beside`` (a
start while another run of the job runs, under every policy but ``allow``),
``wait_behind_ended`` (I9: a wait written behind a holder that has ended: nobody owes it its
promotion), ``cancelled_after`` (``cancel_other`` asked a run after the one waiting, in the
chain, to stop: the request must reach the run before it).

At the end of a holder's worker (its commit answered): ``promotion_owed`` (I9: the run it named
still waits; the detector would promote it a lease later).

After the drive: ``waits_at_quiescence`` (a run still waiting: nobody promoted it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from jobsched.core.writes import RUNS, Item, Update, WriteOp

from jobsched_tools.successor import writes as w
from jobsched_tools.successor import writes_overlap as wo

Violation = tuple[str, str, str]
BESIDE, MORE_THAN_ONE, CYCLE = "overlap_beside", "more_than_one_waits", "waits_cycle"
BEHIND_ENDED, UNNAMED, SKIPPED_ALL = "wait_behind_ended", "wait_unnamed", "skipped_under_buffer_all"
CANCELLED_AFTER, WAITS_AT_END = "cancelled_after", "waits_at_quiescence"
BEHIND_FUTURE, OWED = "manual_behind_future", "promotion_owed"
ASKED_STARTED = "started_when_asked_to_stop"


def check_write(
    proto: w.Protocol, ops: Iterable[WriteOp], before: Mapping[str, Item], runs: Mapping[str, Item], now: int
) -> list[Violation]:
    found: list[Violation] = []
    for op in ops:
        if not isinstance(op, Update) or op.table != RUNS:
            continue
        run_id = str(op.key["run_id"])
        verb = op.label.split(" ", 1)[0]
        if verb == "start":
            found += _beside(run_id, before)
            if before.get(run_id, {}).get("cancel_requested") is not None:
                found.append(
                    (
                        ASKED_STARTED,
                        run_id,
                        f"started after {before[run_id]['cancel_requested']} asked it to stop",
                    )
                )
        elif verb in ("skip", "buffer") and proto.overlap != "buffer_all":
            found += _behind_future(run_id, runs, now)
        elif op.label.startswith("buffer names"):
            found += _behind_ended(run_id, runs)
            waiter = op.set.get("cancel_requested")
            if waiter is not None:
                found += _cancelled_after(str(waiter), run_id, runs)
    return found + check_tables(proto, runs)


def _beside(run_id: str, before: Mapping[str, Item]) -> list[Violation]:
    running = sorted(other for other, run in before.items() if other != run_id and run["status"] == w.RUNNING)
    return [(BESIDE, run_id, f"started while {running} ran")] if running else []


def _behind_future(run_id: str, runs: Mapping[str, Item], now: int) -> list[Violation]:
    """W3's promise (issue 25, case 5): an ad-hoc run is skipped, or waits, only behind a run that
    runs or is due, never behind a claimed occurrence not yet due (``buffer_all`` excepted: strict
    chain order)."""
    run = runs.get(run_id, {})
    holder = runs.get(str(run.get("blocked_by")))
    if run.get("kind") == w.MANUAL and holder is not None and wo.not_yet_due(holder, now):
        return [(BEHIND_FUTURE, run_id, f"{run['status']} behind {holder['run_id']}, not yet due at {now}")]
    return []


def owed_promotion(runs: Mapping[str, Item], holder_id: str) -> list[Violation]:
    """I9 at the end of the holder's worker: the run its holder named no longer waits (its end
    promoted it), unless the holder has not ended."""
    holder = runs.get(holder_id)
    if holder is None or holder["status"] in wo.UNFINISHED or holder.get("buffered_next") is None:
        return []
    waiting = runs.get(str(holder["buffered_next"]))
    if waiting is not None and waiting["status"] == wo.BUFFERED and waiting.get("blocked_by") == holder_id:
        return [(OWED, str(waiting["run_id"]), f"still waits after {holder_id} ended and its worker left")]
    return []


def _behind_ended(holder_id: str, runs: Mapping[str, Item]) -> list[Violation]:
    holder = runs.get(holder_id)
    if holder is None or holder["status"] not in wo.UNFINISHED:
        return [(BEHIND_ENDED, holder_id, f"a wait written behind a {holder and holder['status']} holder")]
    return []


def _after_in_chain(later: str, earlier: str, runs: Mapping[str, Item]) -> bool:
    """Whether ``earlier`` lies before ``later`` in the chain (``after_run_id``, back from it)."""
    at: str | None = str(runs[later].get("after_run_id")) if runs.get(later, {}).get("after_run_id") else None
    seen: set[str] = set()
    while at is not None and at not in seen and at in runs:
        if at == earlier:
            return True
        seen.add(at)
        link = runs[at].get("after_run_id")
        at = str(link) if link is not None else None
    return False


def _cancelled_after(waiter: str, holder_id: str, runs: Mapping[str, Item]) -> list[Violation]:
    """The holder asked to stop comes before the waiter in turn order: before it in the chain, or
    the run that overtook it. A holder after it in the chain that did not overtake it is a run
    the new run should have waited for being cancelled by the old one's turn."""
    if _after_in_chain(holder_id, waiter, runs) and runs[waiter].get("overtaken_by") != holder_id:
        return [(CANCELLED_AFTER, holder_id, f"asked to stop by {waiter}, a run before it in the chain")]
    return []


def waits_for(run: Item, runs: Mapping[str, Item]) -> list[str]:
    if run["status"] not in wo.UNFINISHED:
        return []
    edges = []
    if run["status"] == wo.BUFFERED and run.get("blocked_by"):
        edges.append(str(run["blocked_by"]))
    if run.get("overtaken_by"):
        edges.append(str(run["overtaken_by"]))
    return [other for other in edges if runs.get(other, {}).get("status") in wo.UNFINISHED]


def _cycle(runs: Mapping[str, Item]) -> list[str] | None:
    for start in sorted(runs):
        path, at = [start], start
        while True:
            following = waits_for(runs[at], runs)
            if not following:
                break
            at = following[0]
            if at in path:
                return path[path.index(at) :]
            path.append(at)
            if len(path) > len(runs):
                break
    return None


def check_tables(proto: w.Protocol, runs: Mapping[str, Item]) -> list[Violation]:
    found: list[Violation] = []
    waiting = sorted(run_id for run_id, run in runs.items() if run["status"] == wo.BUFFERED)
    if proto.overlap in wo.ONE_WAITS and len(waiting) > 1:
        found.append((MORE_THAN_ONE, w.JOB, f"{waiting} wait at once"))
    if proto.overlap != "buffer_all":
        for run_id in waiting:
            holder = runs.get(str(runs[run_id].get("blocked_by")))
            if holder is None or holder.get("buffered_next") != run_id:
                found.append((UNNAMED, run_id, f"waits behind {runs[run_id].get('blocked_by')}, unnamed"))
    if proto.overlap == "buffer_all":
        found += [
            (SKIPPED_ALL, run_id, "skipped") for run_id, run in runs.items() if run["status"] == wo.SKIPPED
        ]
    cycle = _cycle(runs)
    if cycle is not None:
        found.append((CYCLE, cycle[0], f"waits for itself through {cycle}"))
    return found


def check_final(proto: w.Protocol, runs: Mapping[str, Item]) -> list[Violation]:  # noqa: ARG001
    return [
        (WAITS_AT_END, run_id, "still waits") for run_id, run in runs.items() if run["status"] == wo.BUFFERED
    ]
