"""EventBridge Scheduler schedules as jobsched jobs (``jobsched import``).

Reads schedules as ``aws scheduler get-schedule`` returns them (the GetSchedule response:
https://docs.aws.amazon.com/scheduler/latest/APIReference/API_GetSchedule.html) and plans one job
per schedule, through ``JobDefinition`` (so through the one schedule parser, core/schedule): the
expression and its zone, the start and end dates, the state, the target (by its ARN's service,
onto a built-in handler) and the retry policy. What cannot be carried over is said, per schedule:

- ``blockers``: the schedule is not imported (a target type jobsched has no handler for, an
  expression or name jobsched refuses);
- ``notes``: imported, but it behaves differently in a way a person should know (a flexible time
  window as ``jitter_seconds``, cut to 10 minutes; a dead-letter queue; the maximum event age;
  the role; when a schedule's ``ActionAfterCompletion: DELETE`` takes effect).

Each get-schedule field has its mapper (``FIELD_MAPPERS``); ``plan_schedule`` runs them all, so a
schedule is refused with every reason at once, and never raises: one malformed schedule never
stops an import.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jobsched.core.job import InvalidJob, JobDefinition, OverlapPolicy

from jobsched_tools.importer.fields import FIELD_MAPPERS, MAX_ATTEMPTS, MAX_WINDOW_MINUTES, FieldMapper
from jobsched_tools.importer.names import (
    DEFAULT_GROUP,
    ESCAPE,
    EVENTBRIDGE_NAME,
    MAX_JOB_ID_CHARS,
    job_id_for,
)
from jobsched_tools.importer.plan import PlannedImport, Refused
from jobsched_tools.importer.targets import target_for

# The importer's parts, a module each: plan.py (what one schedule's import yields), names.py (job
# ids), values.py (reading a value), targets.py (the target's handler), fields.py (a mapper per
# field). The names the CLI and the tests import stay importable from here.
__all__ = [
    "DEFAULT_GROUP",
    "ESCAPE",
    "EVENTBRIDGE_NAME",
    "FIELD_MAPPERS",
    "MAX_ATTEMPTS",
    "MAX_JOB_ID_CHARS",
    "MAX_WINDOW_MINUTES",
    "FieldMapper",
    "PlannedImport",
    "Refused",
    "job_id_for",
    "load_plans",
    "plan_schedule",
    "read_schedules",
    "refuse_shared_job_ids",
    "target_for",
]


def read_schedules(path: Path) -> list[dict[str, Any]]:
    """One get-schedule output per file (an object), or a list of them; a directory: each of its
    ``*.json`` files, in name order. Raises on the first file that is not such JSON
    (``load_plans`` refuses it alone instead)."""
    schedules: list[dict[str, Any]] = []
    for file in _files(path):
        for schedule in _documents(file):
            if not isinstance(schedule, dict):
                raise ValueError(
                    f"{file}: expected get-schedule output (a JSON object), got {schedule!r:.80}"
                )
            schedules.append(schedule)
    return schedules


def load_plans(path: Path) -> list[PlannedImport]:
    """Every schedule under ``path`` planned (``plan_schedule``), each on its own: a file that is
    not JSON, or an entry that is not an object, is one refused plan with the reason, and the
    other files and entries are planned as usual. Only a path that cannot be read at all raises
    (``OSError``)."""
    plans: list[PlannedImport] = []
    for file in _files(path):
        try:
            documents = _documents(file)
        except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
            plans.append(PlannedImport(str(file), blockers=[f"not get-schedule JSON: {exc}"]))
            continue
        for index, schedule in enumerate(documents):
            if isinstance(schedule, dict):
                plans.append(plan_schedule(schedule))
            else:
                where = f"{file}[{index}]" if len(documents) > 1 else str(file)
                plans.append(
                    PlannedImport(
                        where,
                        blockers=[f"expected get-schedule output (a JSON object), got {schedule!r:.80}"],
                    )
                )
    return plans


def refuse_shared_job_ids(plans: list[PlannedImport]) -> list[PlannedImport]:
    """A job id planned for two different schedules in one import (only a 64-bit digest collision
    of ``job_id_for``'s last form could do it) is refused for all but the first, so one job is
    never both. The same schedule listed twice is imported twice: the second is ``unchanged``."""
    first: dict[str, str] = {}
    for plan in plans:
        if plan.job is None:
            continue
        taken = first.setdefault(plan.job.job_id, plan.source)
        if taken != plan.source:
            plan.blockers.append(f"job id {plan.job.job_id} is already {taken}'s in this import")
            plan.job = None
    return plans


def _files(path: Path) -> list[Path]:
    return sorted(path.glob("*.json")) if path.is_dir() else [path]


def _documents(file: Path) -> list[Any]:
    document = json.loads(file.read_text(encoding="utf-8"))
    return document if isinstance(document, list) else [document]


def _source(schedule: Any) -> str:
    if not isinstance(schedule, dict):
        return "?"
    group = schedule.get("GroupName")
    return f"{DEFAULT_GROUP if group is None else group!s:.80}/{schedule.get('Name', '?')!s:.80}"


def plan_schedule(schedule: Any) -> PlannedImport:
    """One schedule's job, or the reasons it is not imported: every field's, at once. Never
    raises: whatever the JSON holds, the schedule is planned or refused on its own."""
    plan = PlannedImport(_source(schedule))
    if not isinstance(schedule, dict):
        plan.blockers.append(f"expected get-schedule output (a JSON object), got {schedule!r:.80}")
        return plan
    # EventBridge Scheduler starts each invocation whether the last one finished or not.
    item: dict[str, Any] = {"overlap": OverlapPolicy.ALLOW.value}
    for mapper in FIELD_MAPPERS:
        try:
            mapper(schedule, item, plan)
        except Refused as refused:
            plan.blockers.append(str(refused))
        except Exception as exc:  # a shape no mapper foresaw: this schedule alone is refused
            field_name = mapper.__name__.removeprefix("map_")
            plan.blockers.append(f"{field_name}: cannot read it ({type(exc).__name__}: {exc!s:.200})")
    if plan.blockers:
        return plan
    try:
        plan.job = JobDefinition.from_item(item)  # the registrar's own checks, the schedule's too
    except InvalidJob as exc:
        plan.blockers += [f"not a valid job: {reason}" for reason in exc.reasons]
    return plan
