"""Issue 38: ``jobsched import`` of an EventBridge Scheduler schedule whose target is a universal
target (``arn:aws:scheduler:::aws-sdk:ec2:stopInstances``) registers a job, and that job's run
calls the API on the local stack: the worker process stops the instance on moto, through the
built-in ``aws_sdk`` allowed by the stack's ``AllowedSdkActions``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from jobsched.adapters.aws import make_client
from jobsched_tools.cli.main import main
from jobsched_tools.local.stack import LocalStack, StackOptions

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_an_imported_universal_target_stops_an_instance_on_the_local_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    options = StackOptions(
        workers=1,
        tick_seconds=1.0,
        prefix="jobsched-universal",
        settings={"ALLOWED_SDK_ACTIONS": "ec2:StopInstances"},
    )
    with LocalStack(options) as stack:
        state = stack.state()
        ec2 = make_client("ec2", state["endpoint_url"], state["region"])
        image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        instance = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
        schedule = {
            "Arn": "arn:aws:scheduler:us-east-1:123456789012:schedule/default/stop-dev",
            "GroupName": "default",
            "Name": "stop-dev",
            "ScheduleExpression": "cron(0 20 * * ? *)",
            "State": "ENABLED",
            "Target": {
                "Arn": "arn:aws:scheduler:::aws-sdk:ec2:stopInstances",
                "Input": json.dumps({"InstanceIds": [instance]}),
                "RetryPolicy": {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 2},
                "RoleArn": "arn:aws:iam::123456789012:role/scheduler-ec2",
            },
        }
        (tmp_path / "stop-dev.json").write_text(json.dumps(schedule))
        resources = stack.resources
        monkeypatch.setenv("AWS_ENDPOINT_URL", state["endpoint_url"])
        monkeypatch.setenv("AWS_DEFAULT_REGION", state["region"])
        target = [
            *("--jobs-table", resources.jobs_table, "--state-table", resources.state_table),
            *("--runs-table", resources.runs_table, "--queue-url", resources.work_queue_url),
            *("--shard-count", str(stack.config().shard_count)),
        ]
        with pytest.raises(SystemExit) as exited:
            main(["import", str(tmp_path / "stop-dev.json"), "--json", *target])
        report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert exited.value.code in (0, None), report
        (entry,) = report["schedules"]
        assert entry["action"] == "scheduled" and entry["job"]["target"] == "aws_sdk"

        run_id = stack.operations().trigger("stop-dev", request_id="now")  # runs now, outside its schedule
        deadline = time.monotonic() + 120
        status = None
        while time.monotonic() < deadline:
            run = stack.operations().get_run(str(run_id))
            status = run.get("status") if run else None
            if status in ("succeeded", "failed"):
                break
            time.sleep(0.5)
        assert status == "succeeded", stack.operations().get_run(str(run_id))
        found = ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]
        assert found["State"]["Name"] in ("stopping", "stopped")
