"""The invariants checked after every run, from the store's run records, the effects table and
the simulation's own ledger. Each violation names its kind and its run or job, so the trace can
be filtered to it."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from jobsched.adapters.memory_store import MemoryStore
from jobsched.core.clock import dt_to_ms, iso_z, ms_to_dt
from jobsched.core.job import MisfirePolicy, OverlapPolicy
from jobsched.core.run import run_id_for
from jobsched.core.writes import RUNS, STATE
from jobsched.ports import Store
from jobsched.sim.faults import EFFECTS
from jobsched.sim.report import ChaosReport, trace_for

if TYPE_CHECKING:
    from jobsched.sim.world import World

COMMITTED = ("succeeded", "failed")
POLICY = ("skipped", "missed")


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


def check(world: World) -> ChaosReport:
    cfg = world.cfg
    report = ChaosReport(cfg.seed, cfg.jobs, cfg.hours, cfg.store, start=iso_z(world.start_ms))
    violations: list[tuple[str, str, str]] = []  # (kind, key, detail)

    def violate(kind: str, key: str, detail: str) -> None:
        violations.append((kind, key, detail))

    inner = world.store.inner
    runs = {str(r["run_id"]): r for r in all_items(inner, RUNS)}
    jobs = {str(j["job_id"]): j for j in all_items(inner, STATE)}
    effects = all_items(inner, EFFECTS)
    now = world.clock.now_ms()
    runs_of: dict[str, list[dict[str, Any]]] = {}
    for run in runs.values():
        runs_of.setdefault(str(run["job_id"]), []).append(run)

    # 1. at most one commit per occurrence, and never by a fenced-out actor (the ledger).
    for run_id, commits in world.store.ledger.commits.items():
        if len(commits) > 1:
            report.duplicate_commits += len(commits) - 1
            who = "; ".join(
                f"{actor} token {token} at {iso_z(at - at % 1000)}" for at, actor, token, _ in commits
            )
            violate("duplicate_commit", run_id, f"{len(commits)} commits: {who}")
    for run_id, detail in world.store.ledger.fenced_commits:
        report.fenced_commits += 1
        violate("fenced_out_commit", run_id, detail)

    # 2. effects exactly once per succeeded run, none without one.
    effect_runs: Counter[str] = Counter()
    for effect in effects:
        run_id = str(effect.get("run_id") or effect["pk"])
        count = int(effect.get("count", 1))
        effect_runs[run_id] += count
    for run_id, actor in world.store.ledger.effect_conflicts:
        report.duplicate_effects += 1
        violate("duplicate_effect", run_id, f"{actor} passed the commit fence but the effect existed already")
    for run_id, count in effect_runs.items():
        effect_run = runs.get(run_id)
        if count > 1:
            report.duplicate_effects += count - 1
            violate("duplicate_effect", run_id, f"effect applied {count} times")
        if effect_run is None or effect_run.get("status") != "succeeded":
            status = None if effect_run is None else effect_run.get("status")
            violate("effect_without_success", run_id, f"run is {status}")
    for run in runs.values():
        if run.get("status") == "succeeded" and effect_runs[str(run["run_id"])] != 1:
            violate(
                "success_without_effect",
                str(run["run_id"]),
                f"effect count {effect_runs[str(run['run_id'])]}",
            )

    # 3. every due occurrence is committed or recorded with a reason; nothing else was run.
    for job_id, sim in world.by_id.items():
        definition = sim.definition
        schedule = definition.compiled_schedule()
        registered = world.registered_at[job_id]
        due = [dt_to_ms(t) for t in schedule.occurrences(ms_to_dt(registered), ms_to_dt(world.window_end))]
        due_ids = set()
        committed = 0
        for occurrence in due:
            run_id = run_id_for(job_id, occurrence)
            due_ids.add(run_id)
            report.occurrences_due += 1
            found = runs.get(run_id)
            status = None if found is None else found.get("status")
            if status in COMMITTED:
                committed += 1
                report.committed_runs += 1
                if status == "succeeded":
                    report.succeeded_runs += 1
                else:
                    report.failed_runs += 1
            elif status in POLICY:
                report.policy_misses += 1
                if not found or not found.get("reason"):
                    violate("miss_without_reason", run_id, f"{status} with no reason")
            else:
                report.lost_occurrences += 1
                violate("lost_occurrence", run_id, f"run is {status or 'absent'} after the drain")
        for run in runs_of.get(job_id, []):
            if run["scheduled_at"] <= world.window_end and str(run["run_id"]) not in due_ids:
                violate("run_not_due", str(run["run_id"]), "a run for an instant that is no occurrence")
        # 3b. run_all + allow with no outage beyond max_catchup: every occurrence committed.
        if definition.misfire.policy is MisfirePolicy.RUN_ALL and definition.overlap is OverlapPolicy.ALLOW:
            grace = definition.misfire.grace_seconds * 1000
            worst = max(
                (sum(1 for t in due if a - grace - 120_000 <= t <= b + 120_000) for a, b in world.outages),
                default=0,
            )
            if worst <= definition.misfire.max_catchup:
                report.run_all_jobs_checked += 1
                if committed != len(due):
                    violate(
                        "run_all_incomplete",
                        job_id,
                        f"{committed} of {len(due)} occurrences committed (worst outage {worst} "
                        f"<= max_catchup {definition.misfire.max_catchup})",
                    )
        # 4. the job's pointer is the next occurrence after its last claimed one.
        item = jobs.get(job_id)
        claimed = [int(r["scheduled_at"]) for r in runs_of.get(job_id, [])]
        last = max(claimed, default=registered)
        expected = schedule.next_after(ms_to_dt(last))
        if item is None:
            violate("job_missing", job_id, "the job item is gone")
        elif item.get("status") == "active":
            if expected is None or item.get("next_run_at") != dt_to_ms(expected):
                violate(
                    "next_run_inconsistent",
                    job_id,
                    f"next_run_at {item.get('next_run_at')} but the next occurrence after the last "
                    f"claimed {iso_z(last)} is {expected}",
                )
        elif item.get("status") == "finished":
            if expected is not None:
                violate("finished_early", job_id, f"finished, but {expected} is still to come")
        else:
            violate("job_status", job_id, f"job is {item.get('status')}")

    # 5. no lease left expired at the end (the detector runs every minute, faults are off).
    bound = now - world.sched_cfg.clock_skew_allowance_ms - 2 * 60_000
    for run in runs.values():
        expires = run.get("lease_expires_at")
        if expires is not None and int(expires) < bound:
            violate(
                "lease_left_expired",
                str(run["run_id"]),
                f"{run.get('status')}, lease expired {iso_z(int(expires))}",
            )

    violations += [("unexpected_exception", v.split(" ", 2)[1].rstrip(":"), v) for v in world.unexpected]
    report.invariant_violations = [f"{kind} {key}: {detail}" for kind, key, detail in violations]
    report.violation_keys = list(dict.fromkeys(key for _, key, _ in violations))
    report.leases_recovered = world.leases_recovered
    report.faults_injected = dict(sorted(world.counts.items()))
    report.outcomes = dict(sorted(world.outcomes.items()))
    if isinstance(inner, MemoryStore):
        report.store_requests = sum(inner.request_counts.values())
    if violations:
        report.trace = trace_for(world.entries, report.violation_keys)
    return report
