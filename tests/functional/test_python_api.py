"""The Python API (``jobsched_tools.api.connect``) on in-process moto: its views give instants as
``datetime``s (issue 36, item 7), as the CLI shows them, not the tables' epoch milliseconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobsched.core.job import JobDefinition
from jobsched.core.state import Registration
from jobsched_tools.api import connect
from jobsched_tools.emulator.provision import Resources


def test_get_list_and_runs_give_datetimes(resources: Resources) -> None:
    ops = connect(
        jobs_table=resources.jobs_table,
        state_table=resources.state_table,
        runs_table=resources.runs_table,
        queue_url=resources.work_queue_url,
        shard_count=4,
    )
    start = datetime(2030, 1, 1, tzinfo=UTC)
    before = datetime.now(UTC)
    definition = JobDefinition(job_id="py", schedule="rate(1 hour)", target="log", start=start)
    assert ops.register(definition) is Registration.SCHEDULED
    job = ops.get("py")
    assert job["next_run_at"] == start  # the first occurrence: its start
    assert isinstance(job["registered_at"], datetime)
    assert before - timedelta(seconds=1) <= job["registered_at"] <= datetime.now(UTC) + timedelta(seconds=1)
    assert job["start"] == start and job["start"].tzinfo is not None
    assert ops.list_jobs()[0]["next_run_at"] == start
    run_id = ops.trigger("py", request_id="r1")
    (run,) = ops.runs("py")
    assert isinstance(run["scheduled_at"], datetime)
    assert not any(name.endswith("_at") and isinstance(v, int) for name, v in run.items())
    assert ops.get_run(run_id)["scheduled_at"] == run["scheduled_at"]  # type: ignore[index]
