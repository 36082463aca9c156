"""The operations CLI end to end on moto: what a person types, what they see, what lands in DynamoDB."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from jobsched_tools.cli.main import main
from jobsched_tools.deployment import AllowListValues, Target
from jobsched_tools.emulator.provision import Resources

JOB = {
    "job_id": "nightly-report",
    "schedule": "cron(0 3 * * ? *)",
    "timezone": "Europe/Berlin",
    "target": "log",
    "payload": {"report": "daily"},
    "overlap": "allow",
}


def stack_args(resources: Resources) -> list[str]:
    """The local stack's tables and work queue, as the CLI's options name them."""
    return [
        "--jobs-table",
        resources.jobs_table,
        "--state-table",
        resources.state_table,
        "--runs-table",
        resources.runs_table,
        "--queue-url",
        resources.work_queue_url,
    ]


def run_cli(capsys: pytest.CaptureFixture[str], resources: Resources, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main([*args, *stack_args(resources), "--shard-count", "4"])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def with_allow_lists(
    resources: Resources, monkeypatch: pytest.MonkeyPatch, allow_lists: AllowListValues
) -> Target:
    """Make ``resources`` a deployment whose allow-lists the CLI knows (as a stack's parameters or
    the local stack's state give them), for the commands that check a job against them
    (``register``, ``import``). Returns its Target, with a copy of ``allow_lists``: a test may
    widen them in place without changing the caller's (a module's constant, say)."""
    from jobsched_tools.cli import cmd_import, common

    target = Target(
        resources.jobs_table,
        resources.state_table,
        resources.runs_table,
        resources.work_queue_url,
        shard_count=4,
        allow_lists=copy.deepcopy(allow_lists),
    )
    for module in (common, cmd_import):
        monkeypatch.setattr(module, "resolve_target", lambda _args: target)
    return target


def as_json(out: str) -> Any:
    return json.loads(out.strip().splitlines()[-1])


def test_register_list_show_pause_resume(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(JOB))
    code, out, _ = run_cli(capsys, resources, "register", str(spec), "--json")
    assert code == 0 and as_json(out) == {"nightly-report": "scheduled"}

    code, out, _ = run_cli(capsys, resources, "list")
    assert code == 0 and "nightly-report" in out and "active" in out and "Europe/Berlin" in out

    code, out, _ = run_cli(capsys, resources, "show", "nightly-report", "--json")
    shown = as_json(out)
    assert shown["status"] == "active" and shown["sched_shard"] in range(4)
    assert json.loads(shown["payload"]) == {"report": "daily"}

    code, out, _ = run_cli(capsys, resources, "pause", "nightly-report", "--json")
    assert as_json(out)["registration"] == "paused"
    code, out, _ = run_cli(capsys, resources, "show", "nightly-report", "--json")
    assert "next_run_at" not in as_json(out)
    code, out, _ = run_cli(capsys, resources, "resume", "nightly-report", "--json")
    assert as_json(out)["registration"] == "scheduled"


def test_register_and_show_action_after_completion(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({**JOB, "job_id": "once", "action_after_completion": "delete"}))
    code, out, _ = run_cli(capsys, resources, "register", str(spec), "--json")
    assert code == 0 and as_json(out) == {"once": "scheduled"}
    code, out, _ = run_cli(capsys, resources, "show", "once")
    assert code == 0 and "action_after_completion: delete" in out.splitlines()
    spec.write_text(json.dumps({**JOB, "job_id": "bad", "action_after_completion": "Delete"}))
    code, out, _ = run_cli(capsys, resources, "register", str(spec))  # written, marked invalid
    assert code == 2 and 'action_after_completion: must be "none" (keep the job item) or "delete"' in out


def test_trigger_twice_with_one_request_id_runs_once(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(JOB))
    run_cli(capsys, resources, "register", str(spec))
    first = as_json(
        run_cli(capsys, resources, "trigger", "nightly-report", "--request-id", "r1", "--json")[1]
    )
    second = as_json(
        run_cli(capsys, resources, "trigger", "nightly-report", "--request-id", "r1", "--json")[1]
    )
    assert first == {"run_id": "nightly-report@manual:r1", "already_requested": False, "status": "pending"}
    assert second == {**first, "already_requested": True}
    code, out, _ = run_cli(capsys, resources, "runs", "nightly-report", "--json")
    runs = as_json(out)
    assert code == 0 and [run["run_id"] for run in runs] == ["nightly-report@manual:r1"]
    assert runs[0]["kind"] == "manual" and runs[0]["status"] == "pending"


def test_backfill_runs_each_occurrence_once_ever(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(JOB))
    run_cli(capsys, resources, "register", str(spec))
    # Three days a week ago: in the past, and within the retention horizon (the CLI's clock is
    # the real one).
    start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=7)
    window = ("--from", start.isoformat(), "--to", (start + timedelta(days=3)).isoformat())
    first = as_json(run_cli(capsys, resources, "backfill", "nightly-report", *window, "--json")[1])
    again = as_json(run_cli(capsys, resources, "backfill", "nightly-report", *window, "--json")[1])
    days = [(start + timedelta(days=d)).date().isoformat() for d in range(3)]
    assert [run_id.split("@")[1][:10] for run_id in first["created"]] == days
    assert {k: again[k] for k in ("created", "rerun", "already_existed")} == {
        "created": [],
        "rerun": [],
        "already_existed": first["created"],
    }


def test_register_accepts_ranges_that_wrap_around(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    # AWS's own example, as someone moving from EventBridge would paste it.
    spec = tmp_path / "nights.json"
    spec.write_text(json.dumps({**JOB, "job_id": "nights", "schedule": "cron(0/30 20-2 ? * MON-FRI *)"}))
    code, out, err = run_cli(capsys, resources, "register", str(spec), "--json")
    assert code == 0 and err == "" and as_json(out) == {"nights": "scheduled"}
    code, out, _ = run_cli(capsys, resources, "show", "nights", "--json")
    assert as_json(out)["status"] == "active" and "next_run_at" in as_json(out)
    # A reversed year range is the one range that cannot wrap.
    spec.write_text(json.dumps({**JOB, "job_id": "years", "schedule": "cron(0 3 * * ? 2030-2026)"}))
    code, out, _ = run_cli(capsys, resources, "register", str(spec))
    assert code == 2 and "year range 2030-2026 is reversed" in out


def test_invalid_job_is_marked_invalid_with_every_reason(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    spec = tmp_path / "bad.json"
    spec.write_text(json.dumps({**JOB, "schedule": "cron(0 3 * * 8 *)", "timezone": "Europe/Berln"}))
    code, out, err = run_cli(capsys, resources, "register", str(spec))
    assert (code, err) == (2, "")
    assert out.splitlines()[0] == "nightly-report: invalid"
    assert "  - timezone: unknown time zone 'Europe/Berln'" in out.splitlines()


def test_unknown_job_and_missing_deployment_are_errors_not_tracebacks(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run_cli(capsys, resources, "show", "nope")
    assert code == 2 and err.startswith("error: no job")
    # No options, no JOBSCHED_* variables, no local stack state file here: which deployment?
    monkeypatch.chdir(tmp_path)
    for name in (
        "JOBSCHED_JOBS_TABLE",
        "JOBSCHED_STATE_TABLE",
        "JOBSCHED_RUNS_TABLE",
        "JOBSCHED_QUEUE_URL",
        "JOBSCHED_STACK_NAME",
    ):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["list"])
    assert exited.value.code == 2 and capsys.readouterr().err.startswith("error:")


def test_delete_keeps_history(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(JOB))
    run_cli(capsys, resources, "register", str(spec))
    run_cli(capsys, resources, "trigger", "nightly-report", "--request-id", "r1")
    code, out, _ = run_cli(capsys, resources, "delete", "nightly-report", "--json")
    assert code == 0 and as_json(out) == {"deleted": "nightly-report"}
    assert run_cli(capsys, resources, "show", "nightly-report")[0] == 2
    assert len(as_json(run_cli(capsys, resources, "runs", "nightly-report", "--json")[1])) == 1
