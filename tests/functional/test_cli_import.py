"""``jobsched import`` end to end on moto: the dry run writes nothing and shows the plan; the
import registers each mappable schedule through the Operations API (the registrar's checks, the
target's too), reports what it could not import and why, and exits 2 for those."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jobsched_tools.emulator.provision import Resources
from test_cli_ops import run_cli

FIXTURES = Path(__file__).parents[1] / "unit" / "eventbridge_schedules"


def test_a_dry_run_shows_the_plan_and_writes_nothing(
    capsys: pytest.CaptureFixture[str],
    resources: Resources,
) -> None:
    code, out, _ = run_cli(capsys, resources, "import", str(FIXTURES), "--dry-run")
    assert code == 2  # some schedules cannot be imported
    lines = out.splitlines()
    assert (
        "default/nightly-report -> nightly-report: would register (cron(0 3 * * ? *) in Europe/Berlin, "
        "target sqs_send)" in lines
    )
    assert (
        "reports/hourly-rollup -> reports:hourly-rollup: would register (rate(1 hour) in UTC, "
        "target sfn_start_execution, paused)" in lines
    )
    # Issue 38: a universal target is an aws_sdk call now; the bad cron is still refused.
    assert (
        "default/stop-dev-instances -> stop-dev-instances: would register (cron(0 20 * * ? *) in UTC, "
        "target aws_sdk)" in lines
    )
    assert "default/bad-cron: not imported" in lines
    assert any(
        line.startswith("  - note: FlexibleTimeWindow FLEXIBLE (15 min): jitter_seconds 600")
        for line in lines
    )
    assert lines[-1] == "7 schedules: 1 not imported, 6 would register (dry run: nothing written)"
    code, out, _ = run_cli(capsys, resources, "list", "--json")
    assert code == 0 and json.loads(out) == []


def test_an_import_registers_the_mappable_schedules(
    capsys: pytest.CaptureFixture[str],
    resources: Resources,
) -> None:
    code, out, _ = run_cli(capsys, resources, "import", str(FIXTURES), "--json")
    assert code == 2
    report = json.loads(out)
    actions = {entry["source"]: entry["action"] for entry in report["schedules"]}
    assert actions == {
        "default/cleanup": "scheduled",
        "default/new-year-greeting": "scheduled",
        "default/nightly-report": "scheduled",
        "reports/hourly-rollup": "paused",
        "default/stop-dev-instances": "scheduled",
        "default/heartbeat": "scheduled",
        "default/bad-cron": "not imported",
    }
    code, out, _ = run_cli(capsys, resources, "show", "reports:hourly-rollup", "--json")
    job = json.loads(out)
    assert (job["target"], job["enabled"], job["schedule"]) == ("sfn_start_execution", False, "rate(1 hour)")
    # Importing again changes nothing, and says so.
    code, out, _ = run_cli(capsys, resources, "import", str(FIXTURES / "nightly-sqs.json"))
    assert code == 0 and out.splitlines()[-1] == "1 schedule: 1 unchanged"


def test_a_malformed_schedule_among_good_ones_is_refused_alone_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
    resources: Resources,
    tmp_path: Path,
) -> None:
    good = json.loads((FIXTURES / "nightly-sqs.json").read_text())
    tags = [{"Key": "team", "Value": "ar"}]
    billing = {**good, "GroupName": "billing", "Name": "invoice-run", "Tags": tags}
    many = {**good["Target"], "RetryPolicy": {"MaximumRetryAttempts": "many"}}
    schedules = [
        good,
        {**good, "Name": "bad-start", "StartDate": "soon"},
        {**good, "Name": "huge-epoch", "StartDate": 1e20},
        {**good, "Name": "many", "Target": many},
        {**good, "Name": "window-text", "FlexibleTimeWindow": "OFF"},
        billing,
    ]
    (tmp_path / "all.json").write_text(json.dumps(schedules))
    (tmp_path / "broken.json").write_text('{"Name": ')
    code, out, err = run_cli(capsys, resources, "import", str(tmp_path))
    assert code == 2 and "Traceback" not in out + err and err == ""
    lines = out.splitlines()
    assert lines[-1] == "7 schedules: 5 not imported, 2 scheduled"
    assert "default/bad-start: not imported" in lines
    assert (
        "  - cannot: StartDate 'soon': not a date jobsched can read (Invalid isoformat string: 'soon')"
    ) in lines
    assert "  - cannot: Target.RetryPolicy.MaximumRetryAttempts 'many': expected a whole number 0-185" in (
        lines
    )
    # The group carries over: list --group finds the job, with its tags.
    code, out, _ = run_cli(capsys, resources, "list", "--group", "billing", "--json")
    assert [job["job_id"] for job in json.loads(out)] == ["billing:invoice-run"]
    code, out, _ = run_cli(capsys, resources, "show", "billing:invoice-run", "--json")
    assert json.loads(out)["tags"] == {"team": "ar"}
