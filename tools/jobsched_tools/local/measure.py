"""Measuring a local-stack session from what it left behind: the run records (each job's
partition of the runs table), the ledger table and the processes' structured events. Nothing
here is computed from the plan except the set of due occurrences, which comes from the schedule
engine."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.core.clock import dt_to_ms
from jobsched.core.job import JobDefinition
from jobsched.core.occurrences import CLAIM, Claim, records
from jobsched.services.paging import query_all

COMMITTED = ("succeeded", "failed")
ACCOUNTED = ("succeeded", "failed", "skipped", "missed")
# A run not ended: ``scheduled`` is a claimed successor-claim run not started yet (job_runs leaves
# the head, which no claim has taken, out).
UNFINISHED = ("scheduled", "pending", "running", "buffered")


@dataclass
class Crash:
    proc: str
    pid: int | None
    run_id: str | None
    at_ms: int


@dataclass
class Report:
    occurrences_due: int = 0
    runs_total: int = 0
    runs_succeeded: int = 0
    runs_failed: int = 0
    runs_skipped: int = 0
    runs_missed: int = 0
    runs_unfinished: int = 0
    runs_leased: int = 0
    duplicate_runs: int = 0
    lost_occurrences: int = 0
    ledger_rows: int = 0
    ledger_runs_succeeded: int = 0
    ledger_mismatches: int = 0
    crashes_injected: int = 0
    crashes_recovered: int = 0  # killed runs that started again after the kill and finished
    leases_recovered: int = 0
    retries: int = 0
    lag_ms_p50: float | None = None
    lag_ms_p99: float | None = None
    recovery_s_max: float | None = None
    per_job: dict[str, dict[str, int]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items()}


def percentile(values: list[int], q: float) -> float | None:
    """Nearest-rank percentile."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


def due_occurrences(definition: JobDefinition, window_from_ms: int, window_to_ms: int) -> list[int]:
    """Occurrences in [from, to], by the schedule engine."""
    schedule = definition.compiled_schedule()
    after = datetime.fromtimestamp((window_from_ms - 1000) / 1000, UTC)
    until = datetime.fromtimestamp(window_to_ms / 1000, UTC)
    return [dt_to_ms(t) for t in schedule.occurrences(after, until) if dt_to_ms(t) >= window_from_ms]


def job_runs(store: DynamoStore, job_id: str) -> list[dict[str, Any]]:
    """The job's runs and records, as readers show them (core/occurrences.py ``records``): under
    the successor claim (issue 37) its partition also holds closure and end markers, cancelled
    heads and its head (its next occurrence, not claimed yet), none of which is a run. A claimed
    run not yet started stays (``scheduled``: unfinished). On legacy items, the partition as
    stored."""
    # The job's partition of the runs table. moto may repeat a page's end item: one per run id.
    items = {run["run_id"]: run for run in query_all(store, "runs-of-job", job_id)}
    shown = records(items[run_id] for run_id in sorted(items))
    return [run for run in shown if run.get(CLAIM) != Claim.NEXT.value]


def ledger_rows(store: DynamoStore, table: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    client = store.client
    kwargs: dict[str, Any] = {"TableName": table}
    while True:
        page = client.scan(**kwargs)
        from jobsched.adapters.dynamodb_store import deserialize_item

        rows += [deserialize_item(item) for item in page.get("Items", [])]
        if "LastEvaluatedKey" not in page:
            return rows
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def measure(
    store: DynamoStore,
    definitions: list[JobDefinition],
    window_from_ms: int,
    window_to_ms: int,
    events: list[dict[str, Any]],
    crashes: list[Crash],
    ledger_table: str | None,
    registered_at: dict[str, int] | None = None,
) -> Report:
    """``registered_at``: when each job's registration returned. An occurrence before that (a
    registration slower than the lead time) was never due: the registrar schedules a new job
    from its next occurrence after now."""
    report = Report(crashes_injected=len(crashes))
    lags: list[int] = []
    runs_by_id: dict[str, dict[str, Any]] = {}
    ledger_jobs = {d.job_id for d in definitions if d.target == "example.ledger"}
    for definition in definitions:
        since = max(window_from_ms, (registered_at or {}).get(definition.job_id, 0) + 1)
        due = due_occurrences(definition, since, window_to_ms)
        runs = job_runs(store, definition.job_id)
        runs_by_id.update((run["run_id"], run) for run in runs)
        _measure_job(report, definition.job_id, due, runs, lags, ledger=definition.job_id in ledger_jobs)
    _count_duplicate_commits(report, events)
    if ledger_table is not None:
        _check_ledger(report, ledger_rows(store, ledger_table), runs_by_id, ledger_jobs)
    report.lag_ms_p50 = percentile(lags, 50)
    report.lag_ms_p99 = percentile(lags, 99)
    _measure_recoveries(report, crashes, runs_by_id)
    return report


def _measure_job(
    report: Report, job_id: str, due: list[int], runs: list[dict[str, Any]], lags: list[int], *, ledger: bool
) -> None:
    """One job's occurrences against its runs: lost and duplicated occurrences, the status
    counts, unfinished or still-leased runs, and the start lag of each scheduled run."""
    by_occurrence: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        by_occurrence[int(run["scheduled_at"])].append(run)
    statuses = Counter(str(run["status"]) for run in runs)
    lost = 0
    for occurrence in due:
        if not any(run["status"] in ACCOUNTED for run in by_occurrence.get(occurrence, [])):
            lost += 1
            report.violations.append(f"lost: {job_id} occurrence {occurrence}")
    for occurrence, group in by_occurrence.items():
        committed = [run for run in group if run["status"] in COMMITTED]
        if len(committed) > 1:
            report.duplicate_runs += len(committed) - 1
            report.violations.append(
                f"duplicate: {job_id} occurrence {occurrence} committed {len(committed)}x"
            )
    report.occurrences_due += len(due)
    report.lost_occurrences += lost
    report.runs_total += len(runs)
    report.runs_succeeded += statuses["succeeded"]
    report.runs_failed += statuses["failed"]
    report.runs_skipped += statuses["skipped"]
    report.runs_missed += statuses["missed"]
    report.per_job[job_id] = {"due": len(due), "lost": lost, **dict(statuses)}
    if ledger:
        report.ledger_runs_succeeded += statuses["succeeded"]
    for run in runs:
        _measure_run(report, run, lags)


def _measure_run(report: Report, run: dict[str, Any], lags: list[int]) -> None:
    if run["status"] in UNFINISHED:
        report.runs_unfinished += 1
        report.violations.append(f"unfinished: {run['run_id']} {run['status']}")
    if "lease_expires_at" in run:
        report.runs_leased += 1
        report.violations.append(f"leased: {run['run_id']}")
    report.leases_recovered += int(run.get("recoveries", 0))
    report.retries += max(0, int(run.get("attempt", 1)) - 1)
    first = run.get("first_started_at") or (
        run.get("started_at") if int(run.get("attempt", 1)) == 1 else None
    )
    if first is not None and run.get("kind", "scheduled") == "scheduled":
        lags.append(int(first) - int(run["scheduled_at"]))


def _count_duplicate_commits(report: Report, events: list[dict[str, Any]]) -> None:
    """More than one committed execution of a run (two workers both believing they finished it)."""
    commits = Counter(
        str(e.get("correlation_id"))
        for e in events
        if e.get("event") in ("run.succeeded", "run.failed") and e.get("by") != "miss_detector"
    )
    for run_id, count in commits.items():
        if count > 1:
            report.duplicate_runs += count - 1
            report.violations.append(f"duplicate: {run_id} committed by {count} executions")


def _check_ledger(
    report: Report,
    rows: list[dict[str, Any]],
    runs_by_id: dict[str, dict[str, Any]],
    ledger_jobs: set[str],
) -> None:
    """Exactly one ledger row for each succeeded ledger run, and none for any other run."""
    report.ledger_rows = len(rows)
    per_key = Counter(str(row["pk"]) for row in rows)
    for key, count in per_key.items():
        row_run = runs_by_id.get(key)
        if count > 1:
            report.duplicate_runs += count - 1
            report.violations.append(f"duplicate: {count} ledger rows for {key}")
        if row_run is None or row_run["status"] != "succeeded":
            report.ledger_mismatches += 1
            report.violations.append(f"ledger row without a succeeded run: {key}")
    for run_id, run in runs_by_id.items():
        if run["job_id"] in ledger_jobs and run["status"] == "succeeded" and run_id not in per_key:
            report.ledger_mismatches += 1
            report.violations.append(f"succeeded ledger run without its row: {run_id}")


def _measure_recoveries(report: Report, crashes: list[Crash], runs_by_id: dict[str, dict[str, Any]]) -> None:
    recoveries: list[float] = []
    for crash in crashes:
        crashed = runs_by_id.get(crash.run_id or "")
        if crashed is not None and crashed.get("started_at") and int(crashed["started_at"]) > crash.at_ms:
            recoveries.append((int(crashed["started_at"]) - crash.at_ms) / 1000)
            if crashed["status"] in COMMITTED:
                report.crashes_recovered += 1
    report.recovery_s_max = round(max(recoveries), 3) if recoveries else None


def unsettled_jobs(store: DynamoStore, job_ids: list[str]) -> int:
    """Jobs that still have an occurrence to claim (their schedules end with the window, so a
    settled job has no ``next_run_at``)."""
    from jobsched.core.writes import JOBS

    return sum(1 for job_id in job_ids if "next_run_at" in (store.get(JOBS, {"job_id": job_id}) or {}))


def unfinished_runs(store: DynamoStore, job_ids: list[str]) -> int:
    return sum(
        1
        for job_id in job_ids
        for run in job_runs(store, job_id)
        if run["status"] in UNFINISHED or "lease_expires_at" in run
    )
