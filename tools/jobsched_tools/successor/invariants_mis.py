"""The invariants of misfire policies, ``max_runs`` and one-time jobs, and backfill, beside the
model's (``invariants.py``, all still checked).

After every write, over the tables:

- ``one_live_record``: an instant has at most one live record (scheduled, running, succeeded or
  missed, timed or backfill) across every epoch: backfill and settle never decide one instant
  twice;
- ``runs_beyond_max``: a life never has more than ``max_runs`` scheduled runs (claimed or settled
  as runs: a timed record that ran, or a ``scheduled`` one with a run or an end marker as its
  successor);
- ``after_end``: once an end marker lands, no head, no second end marker and no live timed
  record after it.

Of a write: ``late_run_claimed``: an occurrence a claim's put decided (its successor) is never also
decided by a settle (the late run and the claim both, or a claimed run recorded missed).

After the drive, beside ``check_final`` (bounded by the life's end):

- ``policy_fate``: every outage (consecutive occurrences of one epoch a settle, or a change,
  decided) got its policy: ``skip`` runs none of its overdue occurrences; ``run_all`` runs the
  first ``max_catchup`` (less what the head carried) and records the rest; ``run_once`` runs at
  most one, the latest overdue, and one unless a later occurrence ran; every occurrence within
  its grace runs (late);
- ``runs_short``: a life that ended by ``max_runs`` ran exactly ``max_runs``;
- ``not_finished``: a job with a ``max_runs`` or an end whose life must have ended in the window,
  untouched by a pause or a delete, reads as finished (its end marker, no head).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jobsched.core.job import MisfirePolicy
from jobsched.core.writes import Item, Update, WriteOp

from jobsched_tools.successor import writes as w
from jobsched_tools.successor import writes_mis as m
from jobsched_tools.successor.invariants import Violation, check_final, heads

ONE_LIVE, BEYOND_MAX, AFTER_END = "one_live_record", "runs_beyond_max", "after_end"
LATE_CLAIMED, POLICY, SHORT, NOT_FINISHED = "late_run_claimed", "policy_fate", "runs_short", "not_finished"
RAN = (w.RUNNING, w.SUCCEEDED)


def check_tables(proto: m.MisProtocol, runs: Mapping[str, Item]) -> list[Violation]:
    found: list[Violation] = []
    by_instant: dict[int, list[str]] = {}
    for run_id, run in runs.items():
        if run.get("kind") in (w.TIMED, m.BACKFILL) and run["status"] in m.LIVE:
            by_instant.setdefault(int(run["at"]), []).append(run_id)
    for at, ids in sorted(by_instant.items()):
        if len(ids) > 1:
            found.append((ONE_LIVE, str(at), f"live records {sorted(ids)}"))
    if proto.max_runs is not None:
        count = life_runs(runs)
        if count > proto.max_runs:
            found.append((BEYOND_MAX, "j", f"{count} runs, max_runs {proto.max_runs}"))
    ends = [run for run in runs.values() if run["status"] == w.END]
    if ends:
        last = min(int(e["at"]) for e in ends)
        beyond = [
            str(r["run_id"])
            for r in runs.values()
            if r.get("kind") == w.TIMED and r["status"] in m.LIVE and int(r["at"]) > last
        ]
        if len(ends) > 1 or heads(runs) or beyond:
            detail = f"ends {[e['run_id'] for e in ends]}, heads {len(heads(runs))}, after {beyond}"
            found.append((AFTER_END, "j", detail))
    return found


def life_runs(runs: Mapping[str, Item]) -> int:
    """The scheduled runs made (claimed, or settled as runs): backfills do not count."""
    count = 0
    for run in runs.values():
        if run.get("kind") != w.TIMED:
            continue
        successor = runs.get(str(run["next_key"]))
        claimed = successor is not None and successor["status"] != w.CLOSED
        if run["status"] in RAN or (run["status"] == w.SCHEDULED and claimed):
            count += 1
    return count


def check_write(ops: Iterable[WriteOp], claimed: set[str], settled: set[str]) -> list[Violation]:
    del ops
    return [(LATE_CLAIMED, run_id, "claimed and settled") for run_id in sorted(claimed & settled)]


def settled_by(ops: Iterable[WriteOp]) -> list[str]:
    """The heads a settle chunk decided in ``ops``."""
    return [str(op.key["run_id"]) for op in ops if isinstance(op, Update) and op.label.startswith("catchup ")]


def final(
    proto: m.MisProtocol, state: Item | None, runs: Mapping[str, Item], history: list[Any], window_end: int
) -> list[Violation]:
    ends = [run for run in runs.values() if run["status"] == w.END]
    bound = window_end
    if ends:
        bound = min(bound, min(int(e["at"]) for e in ends))
    if proto.until is not None:
        bound = min(bound, proto.until)
    # A backfill's rerun decides its instant as the timed record did.
    as_timed = {
        run_id: {**run, "kind": w.TIMED}
        if run.get("kind") == m.BACKFILL and run["status"] != w.SCHEDULED
        else run
        for run_id, run in runs.items()
    }
    found = check_final(as_timed, history, bound)
    found += policy_fates(proto, runs)
    if proto.max_runs is not None and ends:
        ran = sum(1 for r in runs.values() if r.get("kind") == w.TIMED and r["status"] in RAN)
        if ran != proto.max_runs:
            found.append((SHORT, "j", f"{ran} runs, max_runs {proto.max_runs}"))
    finite = proto.max_runs is not None or proto.until is not None
    untouched = all(status == w.ACTIVE for _, status, _ in history)
    if finite and untouched and state is not None and state["status"] == w.ACTIVE and not ends:
        found.append((NOT_FINISHED, "j", f"no end marker; heads {[h['run_id'] for h in heads(runs)]}"))
    return found


def policy_fates(proto: m.MisProtocol, runs: Mapping[str, Item]) -> list[Violation]:
    found: list[Violation] = []
    decided = sorted(
        (r for r in runs.values() if "decided" in r and r.get("kind") in (w.TIMED, m.BACKFILL)),
        key=lambda r: (int(r["epoch"]), int(r["at"])),
    )
    outages: list[list[Item]] = []
    for run in decided:
        previous = outages[-1][-1] if outages else None
        timing = w.Timing.of(run["timing"])
        if (
            previous is not None
            and previous["epoch"] == run["epoch"]
            and timing.after(int(previous["at"])) == run["at"]
        ):
            outages[-1].append(run)
        else:
            outages.append([run])
    for outage in outages:
        first = str(outage[0]["at"])
        late = [r for r in outage if "late" in str(r["fate"])]
        overdue = [r for r in outage if "late" not in str(r["fate"])]
        ran = [r for r in overdue if r["decided"] == "run"]
        if any(r["decided"] != "run" for r in late):
            found.append((POLICY, first, "an occurrence within its grace was not run late"))
        if proto.policy is MisfirePolicy.SKIP and ran:
            found.append((POLICY, first, f"skip ran {[r['at'] for r in ran]}"))
        elif proto.policy is MisfirePolicy.RUN_ALL:
            budget = max(0, proto.max_catchup - int(outage[0].get("catchups", 0)))
            want = [r["at"] for r in overdue[:budget]]
            if [r["at"] for r in ran] != want:
                found.append((POLICY, first, f"run_all ran {[r['at'] for r in ran]}, not {want}"))
        elif proto.policy is MisfirePolicy.RUN_ONCE and overdue:
            if len(ran) > 1 or (ran and ran[0] is not overdue[-1]):
                found.append((POLICY, first, f"run_once ran {[r['at'] for r in ran]}"))
            if not ran and not late and not _next_ran(outage[-1], runs):
                found.append((POLICY, first, "run_once ran none of the outage"))
    return found


def _next_ran(last: Item, runs: Mapping[str, Item]) -> bool:
    """The occurrence after an outage ran (a late claim took it over), or the life ended there."""
    nxt = runs.get(str(last["next_key"]))
    if nxt is None:
        return False
    return nxt["status"] == w.END or (
        nxt.get("kind") == w.TIMED and nxt["status"] in (*RAN, w.SCHEDULED) and "decided" not in nxt
    )
