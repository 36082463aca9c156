"""``jobsched import`` on malformed and unusual input (issue 34, items 6-8; issue 36, item 1):

- one malformed schedule among many is refused with its reasons, and never stops the others
  (checked on the examples the issue names and as a property over arbitrary JSON in any field);
- every group and schedule name EventBridge Scheduler accepts (1-64 of ``[0-9a-zA-Z-_.]``,
  CreateSchedule's Name and GroupName) maps to a valid job id of its own;
- a flexible time window becomes ``jitter_seconds`` (a window over 10 minutes is cut, noted);
- the schedule group becomes the job's ``group``, and ``Tags`` its ``tags``.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobsched.core.job import GROUP_PATTERN, JobDefinition, is_job_id
from jobsched_tools.importer.eventbridge import (
    ESCAPE,
    PlannedImport,
    job_id_for,
    load_plans,
    plan_schedule,
    refuse_shared_job_ids,
)

FIXTURES = Path(__file__).parent / "eventbridge_schedules"
GOOD = json.loads((FIXTURES / "nightly-sqs.json").read_text())


def schedule(**changes: Any) -> dict[str, Any]:
    result = copy.deepcopy(GOOD)
    result.update(changes)
    return result


def target(**changes: Any) -> dict[str, Any]:
    return {**GOOD["Target"], **changes}


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (schedule(StartDate="the first of December"), "StartDate 'the first of December': not a date"),
        (schedule(StartDate=1e20), "StartDate 1e+20: not a date jobsched can read"),
        (schedule(EndDate=[2026]), "EndDate [2026]: not a date"),
        (
            schedule(Target=target(RetryPolicy={"MaximumRetryAttempts": "many"})),
            "Target.RetryPolicy.MaximumRetryAttempts 'many': expected a whole number 0-185",
        ),
        (schedule(FlexibleTimeWindow="OFF"), "FlexibleTimeWindow 'OFF': expected an object"),
        (schedule(Target="arn:aws:sqs:eu-central-1:123456789012:reports"), "Target 'arn:aws:sqs"),
        (
            schedule(Target=target(Input={"report": "daily"})),
            "Target.Input {'report': 'daily'}: expected a string",
        ),
        (schedule(Name=7), "Name 7 is not an EventBridge Scheduler name"),
        (schedule(State="PAUSED"), "State 'PAUSED': expected ENABLED or DISABLED"),
        (schedule(ScheduleExpression=None), "ScheduleExpression None: expected text"),
        (schedule(Tags="team=billing"), "Tags 'team=billing': expected"),
    ],
)
def test_a_malformed_schedule_is_refused_with_its_reason(bad: dict[str, Any], reason: str) -> None:
    plan = plan_schedule(bad)
    assert plan.job is None
    assert any(reason in blocker for blocker in plan.blockers), plan.blockers


def test_every_reason_is_given_at_once() -> None:
    plan = plan_schedule(schedule(StartDate="soon", State="PAUSED", FlexibleTimeWindow="OFF"))
    assert plan.job is None
    fields = [blocker.split(" ")[0] for blocker in plan.blockers]
    assert fields == ["StartDate", "State", "FlexibleTimeWindow"]


def test_a_malformed_file_or_entry_among_good_ones_is_refused_alone(tmp_path: Path) -> None:
    (tmp_path / "a-good.json").write_text(json.dumps(GOOD))
    (tmp_path / "b-bad-json.json").write_text("{not json")
    (tmp_path / "c-list.json").write_text(
        json.dumps([schedule(Name="second", StartDate=1e20), "a string", schedule(Name="third")])
    )
    plans = load_plans(tmp_path)
    assert [(plan.source, plan.job is not None) for plan in plans] == [
        ("default/nightly-report", True),
        (str(tmp_path / "b-bad-json.json"), False),
        ("default/second", False),
        (f"{tmp_path / 'c-list.json'}[1]", False),
        ("default/third", True),
    ]
    assert plans[1].blockers[0].startswith("not get-schedule JSON: ")


# Arbitrary JSON, as a hand-edited or truncated get-schedule output may hold in any field.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=10), children, max_size=3)
    ),
    max_leaves=8,
)
# Where a value may be replaced: a top-level field, or a field of Target and of its parts.
PLACES = [
    *[(key,) for key in GOOD],
    ("Tags",),
    *[("Target", key) for key in GOOD["Target"]],
    ("Target", "RetryPolicy", "MaximumRetryAttempts"),
    ("Target", "RetryPolicy", "MaximumEventAgeInSeconds"),
    ("Target", "SqsParameters"),
    ("FlexibleTimeWindow", "Mode"),
    ("FlexibleTimeWindow", "MaximumWindowInMinutes"),
]


def replaced(base: dict[str, Any], place: tuple[str, ...], value: Any) -> dict[str, Any]:
    result = copy.deepcopy(base)
    holder: Any = result
    for key in place[:-1]:
        if not isinstance(holder.get(key), dict):
            holder[key] = {}
        holder = holder[key]
    holder[place[-1]] = value
    return result


def summary(plan: PlannedImport) -> Any:
    return (plan.source, plan.job.to_item() if plan.job else None, plan.blockers, plan.notes)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=st.lists(st.tuples(st.sampled_from(PLACES), json_values), min_size=1, max_size=3))
def test_any_malformed_schedule_is_planned_or_refused_alone(
    changes: list[tuple[tuple[str, ...], Any]],
) -> None:
    bad = schedule(Name="mangled")
    for place, value in changes:
        bad = replaced(bad, place, value)
    plan = plan_schedule(bad)  # never raises
    assert (plan.job is None) == bool(plan.blockers)
    if plan.job is not None:
        assert plan.job == JobDefinition.from_item(plan.job.to_item())
    # Between two good schedules, it changes neither of theirs.
    alone = [plan_schedule(schedule(Name=name)) for name in ("before", "after")]
    batch = [plan_schedule(s) for s in (schedule(Name="before"), bad, schedule(Name="after"))]
    assert [summary(batch[0]), summary(batch[2])] == [summary(p) for p in alone]


# --- names ---------------------------------------------------------------------------------------
eventbridge_names = st.text(alphabet="0123456789abcXYZ-_.", min_size=1, max_size=64) | st.sampled_from(
    ["default", "a" * 64, "_" * 64, "-" + "a" * 63, "." + "b" * 63, "a" * 63]
)


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(eventbridge_names, eventbridge_names), min_size=2, max_size=30))
def test_every_eventbridge_name_maps_to_a_valid_job_id_of_its_own(pairs: list[tuple[str, str]]) -> None:
    ids: dict[str, tuple[str, str]] = {}
    for group, name in pairs:
        job_id = job_id_for(group, name)
        assert is_job_id(job_id), (group, name, job_id)
        assert job_id == job_id_for(group, name)  # deterministic
        assert ids.setdefault(job_id, (group, name)) == (group, name), "two schedules, one job id"


def test_names_that_are_not_job_ids_as_they_are() -> None:
    assert job_id_for("default", "nightly") == "nightly"
    assert job_id_for("billing", "_invoice") == "billing:_invoice"
    assert job_id_for("default", "_nightly") == f"{ESCAPE}_nightly"
    assert job_id_for("_billing", "run") == f"{ESCAPE}_billing:run"
    # 64 + 64 characters: 129 as GROUP:NAME; run together they are 128, and no readable id is.
    long_group, long_name = "g" * 64, "n" * 64
    assert job_id_for(long_group, long_name) == long_group + long_name
    assert job_id_for("g" * 63, "n" * 64) == "g" * 63 + ":" + "n" * 64
    # A group starting with "_" with such a name: eb::, the name cut, ::, a digest.
    cut = job_id_for("_" + "g" * 63, "n" * 64)
    assert is_job_id(cut) and len(cut) == 128 and cut.startswith(ESCAPE + "_g") and cut.count("::") == 2
    assert cut != job_id_for("_" + "g" * 63, "n" * 63 + "m")


def test_a_second_schedule_with_a_job_id_taken_in_the_same_import_is_refused() -> None:
    first, second = plan_schedule(schedule(Name="same")), plan_schedule(schedule(Name="other"))
    assert first.job is not None and second.job is not None
    second.job = first.job  # as a digest collision would make it
    refuse_shared_job_ids([first, second])
    assert first.job is not None and second.job is None
    assert second.blockers == ["job id same is already default/same's in this import"]


# --- flexible time windows -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("window", "jitter", "note"),
    [
        ({"Mode": "OFF"}, 0, None),
        (None, 0, None),
        ({"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 1}, 60, "FLEXIBLE (1 min): jitter_seconds 60"),
        ({"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 10}, 600, "(10 min): jitter_seconds 600; each"),
        ({"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 11}, 600, "runs are spread over 10 minutes, not 11"),
        ({"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 1440}, 600, "not 1440"),
    ],
)
def test_a_flexible_time_window_is_a_start_window(window: Any, jitter: int, note: str | None) -> None:
    plan = plan_schedule(schedule(FlexibleTimeWindow=window))
    assert plan.job is not None, plan.blockers
    assert plan.job.jitter_seconds == jitter
    window_notes = [n for n in plan.notes if n.startswith("FlexibleTimeWindow")]
    assert (window_notes == []) if note is None else any(note in n for n in window_notes), window_notes


@pytest.mark.parametrize(
    ("window", "reason"),
    [
        ({"Mode": "FLEXIBLE"}, "without MaximumWindowInMinutes"),
        ({"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 1441}, "expected a whole number 1-1440"),
        ({"Mode": "SOMETIMES"}, "expected OFF or FLEXIBLE"),
    ],
)
def test_a_window_eventbridge_would_refuse_is_refused(window: Any, reason: str) -> None:
    plan = plan_schedule(schedule(FlexibleTimeWindow=window))
    assert plan.job is None and any(reason in b for b in plan.blockers), plan.blockers


# --- groups and tags -----------------------------------------------------------------------------
def test_the_group_and_tags_carry_over() -> None:
    tags = [{"Key": "team", "Value": "billing"}, {"Key": "tier", "Value": "1"}]
    plan = plan_schedule(schedule(GroupName="billing", Name="invoice-run", Tags=tags))
    assert plan.job is not None
    assert (plan.job.job_id, plan.job.group, plan.job.tags) == (
        "billing:invoice-run",
        "billing",
        {"team": "billing", "tier": "1"},
    )
    assert plan_schedule(GOOD).job.group == "default"  # type: ignore[union-attr]
    escaped = plan_schedule(schedule(GroupName="_private", Name="x")).job
    assert escaped is not None and escaped.group == f"{ESCAPE}_private"
    assert re.fullmatch(GROUP_PATTERN, escaped.group)
