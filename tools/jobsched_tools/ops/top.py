"""``jobsched top``: a live status view of a deployment, from what the stack already records.

One refresh makes a bounded number of reads, whatever the size of the deployment:

- the ``next-run`` index, one query per shard, at most ``DUE_PER_SHARD`` items each: the
  occurrences due within ``horizon_s``, and those already past it (the trigger or the detector
  is behind: its backlog);
- the ``lease`` index, one query per shard, at most ``LEASES_PER_SHARD`` entries each, and a
  strongly consistent read of each of those runs (at most ``RUNS_SHOWN``): what is running,
  pending, buffered or retrying, and which leases have lapsed (the detector's backlog);
- one page of the jobs table (at most ``JOBS_SHOWN`` items) and each one's state item, and for
  each of those jobs the last ``CHAIN_STEPS`` runs of its chain (from the state's
  ``latest_run_id``, back along ``after_run_id``): per-job health and recent outcomes with their
  reasons. A ``missed`` record is not in a chain: ``jobsched runs JOB`` and the ``MissedRuns``
  metric show misses.

So at most ``2 x shards + RUNS_SHOWN + JOBS_SHOWN x (2 + CHAIN_STEPS)`` requests a refresh (for
8 shards: 16 queries and at most 190 reads); the last tick of the trigger and the detector are in
their CloudWatch metrics on AWS (``TriggerTicks``, ``DetectorSweeps``), not in the tables.

A job of the successor claim (issue 37; its state records an epoch) has no ``next-run`` entry: its
position is its head (services/head_operations.py). For such a job the jobs section reads its
occurrence items once (HC12's Query) and walks its chain from the head through them (a manual
run, which is not an occurrence item, read by its key as today), and when any shown
job is one, the ``due`` index is read too, one query per shard (at most ``DUE_PER_SHARD`` entries
each): heads only (``is_head_entry``: ``check_at`` = instant + the dispatch lease), due soon, or behind
when past and unclaimed (one GetItem of the head's successor key each, at most ``DUE_PER_SHARD``).
A legacy stack reads exactly what it read before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobsched.core.claim_shape import DeployedShape
from jobsched.core.head import MAX_HEAD_CHECK_DELAY_MS, is_head_entry
from jobsched.core.run import run_key
from jobsched.core.writes import JOBS, RUNS, STATE
from jobsched.ports import Store
from jobsched.services.head_operations import is_successor_job, read_job
from jobsched.services.operations import describe_time

DUE_PER_SHARD = 25
LEASES_PER_SHARD = 25
RUNS_SHOWN = 50
JOBS_SHOWN = 20
CHAIN_STEPS = 5

Item = dict[str, Any]


@dataclass
class Status:
    now: int
    due_soon: list[Item] = field(default_factory=list)  # state items, soonest first
    behind: list[Item] = field(default_factory=list)  # state items whose next run is past
    unfinished: list[Item] = field(default_factory=list)  # runs with a lease
    lapsed: list[Item] = field(default_factory=list)  # of those, leases past their check
    jobs: list[tuple[Item, Item | None, list[Item]]] = field(default_factory=list)
    requests: int = 0  # reads and queries this refresh made


def snapshot(
    store: Store, shard_count: int, now: int, horizon_s: int = 600, shape: DeployedShape | None = None
) -> Status:
    """``shape``: the stack's claim indexes (template.yaml's ClaimShape): a successor stack has no
    ``next-run`` and no ``lease``, so its leases are ``due``'s entries that are not heads. None:
    legacy's indexes (and ``due`` when a successor job is shown)."""
    status = Status(now)
    successor_stack = shape is DeployedShape.SUCCESSOR
    if not successor_stack:
        _next_runs(store, status, shard_count, now, horizon_s)
    entries = _lease_entries(store, status, shard_count, successor_stack, now)
    for entry in sorted(entries, key=lambda e: int(e.get("check_at", 0)))[:RUNS_SHOWN]:
        run = store.get(RUNS, run_key(str(entry["run_id"])))
        status.requests += 1
        if run is None or "lease_expires_at" not in run:
            continue  # finished since the index was read
        status.unfinished.append(run)
        if int(run["lease_expires_at"]) < now:
            status.lapsed.append(run)
    jobs = store.scan(JOBS, JOBS_SHOWN).items
    status.requests += 1
    successor_jobs = False
    for job in sorted(jobs, key=lambda j: str(j["job_id"])):
        job_state = store.get(STATE, {"job_id": job["job_id"]}, consistent=False)
        status.requests += 1
        if is_successor_job(job_state):
            successor_jobs = True
            status.jobs.append(_successor_job(store, status, job, job_state))
            continue
        chain: list[Item] = []
        run_id = job_state.get("latest_run_id") if job_state else None
        while run_id and len(chain) < CHAIN_STEPS:
            run = store.get(RUNS, run_key(str(run_id)))
            status.requests += 1
            if run is None:
                break
            chain.append(run)
            run_id = run.get("after_run_id")
        status.jobs.append((job, job_state, chain))
    if successor_jobs or successor_stack:
        _heads(store, status, shard_count, now, horizon_s)
    return status


def _next_runs(store: Store, status: Status, shard_count: int, now: int, horizon_s: int) -> None:
    for shard in range(shard_count):
        page = store.query("next-run", shard, None, now + horizon_s * 1000, limit=DUE_PER_SHARD)
        status.requests += 1
        for state in page.items:
            (status.behind if int(state["next_run_at"]) < now else status.due_soon).append(state)
    status.due_soon.sort(key=lambda s: int(s["next_run_at"]))
    status.behind.sort(key=lambda s: int(s["next_run_at"]))


def _lease_entries(
    store: Store, status: Status, shard_count: int, successor_stack: bool, now: int
) -> list[Item]:
    """The first ``LEASES_PER_SHARD`` lease entries of each shard: ``lease``'s, or on a successor
    stack ``due``'s that are not heads."""
    entries: list[Item] = []
    for shard in range(shard_count):
        if successor_stack:
            page = store.query("due", shard, None, None, limit=LEASES_PER_SHARD).items
            entries += [entry for entry in page if not _head_not_checked_yet(entry, now)]
        else:
            entries += store.query("lease", shard, None, None, limit=LEASES_PER_SHARD).items
        status.requests += 1
    return entries


def _head_not_checked_yet(entry: Item, now: int) -> bool:
    """A ``due`` entry of a head, or of a claimed run not moved since, whose check has not come
    (``is_head_entry``: its instant plus the dispatch lease it was written under, HC7): not a
    lease yet. One whose check came is read like a lease (a started run keeps its head's entry)."""
    return is_head_entry(entry) and int(entry["check_at"]) > now


def _successor_job(
    store: Store, status: Status, job: Item, state: Item | None
) -> tuple[Item, Item | None, list[Item]]:
    """A successor job's health and chain from one read of its runs partition: the chain from
    the head's ``after_run_id`` (without a head: the end marker's, else the state's chain end),
    its status as readers show it ("active, no head, end marker" is finished, HC5)."""
    read = read_job(store, str(job["job_id"]), state=state)
    status.requests += 1
    by_id = {str(item["run_id"]): item for item in read.items}
    run_id: Any
    if read.head is not None:
        run_id = read.head.get("after_run_id")
    elif read.end_marker is not None:
        run_id = read.end_marker.get("after_run_id")
    else:
        run_id = (state or {}).get("latest_run_id")
    chain: list[Item] = []
    while run_id and len(chain) < CHAIN_STEPS:
        run = by_id.get(str(run_id))
        if run is None:  # a manual run: not an occurrence item
            run = store.get(RUNS, run_key(str(run_id)))
            status.requests += 1
        if run is None:
            break
        chain.append(run)
        run_id = run.get("after_run_id")
    shown = None if state is None else {**state, "status": read.status}
    return job, shown, chain


def _heads(store: Store, status: Status, shard_count: int, now: int, horizon_s: int) -> None:
    """The successor jobs' heads from the ``due`` index (module docstring), shown as the
    ``next-run`` entries are: ``job_id`` and ``next_run_at`` (the head's instant)."""
    entries: list[Item] = []
    for shard in range(shard_count):
        # A head's check_at is its instant plus the dispatch lease it was written under (HC7),
        # which this reader does not know: up to the longest, and the instant decides.
        up_to = now + horizon_s * 1000 + MAX_HEAD_CHECK_DELAY_MS
        entries += store.query("due", shard, None, up_to, limit=DUE_PER_SHARD).items
        status.requests += 1
    until = now + horizon_s * 1000
    heads = [entry for entry in entries if is_head_entry(entry) and int(entry["scheduled_at"]) <= until]
    keys = {str(entry["run_id"]) for entry in heads}
    for entry in sorted(heads, key=lambda e: int(e["scheduled_at"])):
        if str(entry.get("next_key")) in keys:
            continue  # claimed: its successor is the head shown
        at = int(entry["scheduled_at"])
        shown = {"job_id": entry["job_id"], "next_run_at": at}
        if at >= now:
            status.due_soon.append(shown)
            continue
        if len(status.behind) >= DUE_PER_SHARD:
            continue
        successor = store.get(RUNS, run_key(str(entry["next_key"])))
        status.requests += 1
        if successor is None:
            status.behind.append(shown)  # past and unclaimed: the trigger or the detector is behind
    status.due_soon.sort(key=lambda s: int(s["next_run_at"]))
    status.behind.sort(key=lambda s: int(s["next_run_at"]))


def _at(ms: int | None, now: int) -> str:
    if ms is None:
        return "-"
    seconds = (int(ms) - now) / 1000
    when = f"in {seconds:.0f} s" if seconds >= 0 else f"{-seconds:.0f} s ago"
    return f"{describe_time(int(ms))} ({when})"


def _note(run: Item) -> str:
    """Why a run did not run or failed; nothing beside a run that succeeded (the error of an
    earlier attempt stays on its record, and is not how it ended)."""
    if run.get("status") == "succeeded":
        return ""
    note = run.get("reason") or run.get("last_error") or ""
    return str(note).splitlines()[0][:80] if note else ""


def _health(job: Item, state: Item | None, chain: list[Item]) -> str:
    if state is None:
        return "unregistered (the registrar has not seen it yet)"
    status = str(state.get("status"))
    if status != "active":
        reasons = job.get("invalid_reasons")
        return f"{status}: {'; '.join(reasons)}" if reasons else status
    last = next((run for run in chain if run.get("status") not in ("pending", "running", "buffered")), None)
    if last is not None and last.get("status") == "failed":
        return "active, last run FAILED"
    return "active"


def render(status: Status) -> str:
    now = status.now
    lines = [f"jobsched top  {describe_time(now)}  ({status.requests} reads this refresh)", ""]
    lines.append(f"DUE SOON ({len(status.due_soon)})")
    lines += [f"  {s['job_id']:<40} {_at(int(s['next_run_at']), now)}" for s in status.due_soon[:15]]
    lines.append(f"BEHIND: next run past, not yet claimed ({len(status.behind)})")
    lines += [f"  {s['job_id']:<40} {_at(int(s['next_run_at']), now)}" for s in status.behind[:15]]
    lines.append(f"RUNS WITH A LEASE ({len(status.unfinished)}; lapsed: {len(status.lapsed)})")
    for run in status.unfinished[:20]:
        what = str(run.get("status"))
        if what == "pending" and int(run.get("attempt", 1)) > 1:
            what = f"retrying (attempt {run['attempt']})"
        elif what == "pending" and int(run.get("recoveries", 0)) > 0:
            what = f"recovering ({run['recoveries']} redispatches)"
        lapsed = "  LEASE LAPSED" if run in status.lapsed else ""
        lines.append(
            f"  {run['run_id']:<48} {what:<26} lease {_at(int(run['lease_expires_at']), now)}{lapsed}"
        )
    lines.append(f"JOBS ({len(status.jobs)} shown)")
    for job, state, chain in status.jobs:
        lines.append(f"  {job['job_id']:<40} {_health(job, state, chain)}")
        for run in chain:
            note = _note(run)
            lines.append(f"      {run['run_id']:<48} {run.get('status')!s:<10} {note}".rstrip())
    return "\n".join(lines)
