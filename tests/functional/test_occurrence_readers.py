"""Readers of a job's runs partition under the successor claim (issue 37, build step S1; plan §4):
``Operations.runs``, ``jobsched runs``, ``jobsched describe``'s run list and ``jobsched outcomes
replay`` show one line per instant, its live record, and hide closure markers, end markers and
cancelled heads; the epoch only where an instant holds items of two; a ``scheduled`` run as
"claimed, dispatched" or "next (not claimed)". Nothing in the product writes these items yet: the
partition is hand-written, as the plan's §0 shapes them. (Today's data is covered by the
readers' own tests, which pass unchanged.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from harness import KINDS, Env, build
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.core.clock import dt_to_ms
from jobsched.core.run import end_run_id, manual_run_id, run_id_for
from jobsched.core.writes import RUNS, Put
from jobsched.ports import Store
from jobsched.services.outcomes import TERMINAL
from jobsched_tools.cli.main import main
from jobsched_tools.emulator.provision import Resources
from test_cli_honest_output import register
from test_cli_ops import JOB, run_cli, stack_args

JOB_ID = str(JOB["job_id"])
HOUR = 3_600_000


def day(n: int) -> int:
    """The job's instant on day ``n`` of November 2026 (02:00 UTC), in ms."""
    return dt_to_ms(datetime(2026, 11, n, 2, tzinfo=UTC))


def timed(n: int, epoch: int | None = None) -> str:
    return run_id_for(JOB_ID, day(n), epoch)


def run(n: int, epoch: int | None, status: str, next_key: str | None = None, **extra: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "job_id": JOB_ID,
        "run_id": timed(n, epoch),
        "status": status,
        "scheduled_at": day(n),
        "kind": "scheduled",
        "version": 1,
        "attempt": 1,
        **extra,
    }
    if next_key is not None:
        item["next_key"] = next_key
    return item


def ended(n: int) -> dict[str, Any]:
    return {"started_at": day(n) + 1000, "first_started_at": day(n) + 1000, "finished_at": day(n) + 5000}


def partition() -> list[dict[str, Any]]:
    """Three lives of one job, each change a new epoch (§0):
    - day 1: a legacy record (epoch 0);
    - epoch 1 ended at day 2 by ``max_runs``: day 2's run names the end marker as its successor;
    - epoch 2 (``max_runs`` raised) ran day 3 (failed); a re-time (epoch 3) before day 4 cancelled
      the head 4#2 and put its marker at 5#2; epoch 3 ran day 4, claimed day 5 (its successor 6#3
      exists) and has its head at day 6;
    - a manual run on day 3.
    Markers and cancelled heads carry ``finished_at`` too, so that only their status keeps them out
    of a window's outcomes."""
    end_key = end_run_id(JOB_ID, day(2), 1)
    return [
        run(1, None, "succeeded", **ended(1)),
        run(2, 1, "succeeded", end_key, **ended(2)),
        {
            "job_id": JOB_ID,
            "run_id": end_key,
            "status": "end",
            "runs_claimed": 2,
            "finished_at": day(2) + 9000,
        },
        run(3, 2, "failed", timed(4, 2), last_error="RuntimeError: boom", **ended(3)),
        run(4, 2, "cancelled", timed(5, 2), reason="re-timed", finished_at=day(3) + HOUR),
        {
            "job_id": JOB_ID,
            "run_id": timed(5, 2),
            "status": "closed",
            "closes_epoch": 2,
            "closed_by": 3,
            "finished_at": day(3) + HOUR,
        },
        run(4, 3, "succeeded", timed(5, 3), **ended(4)),
        run(5, 3, "scheduled", timed(6, 3), claimed_by="t1"),
        run(6, 3, "scheduled", timed(7, 3), claimed_by="t1"),
        {
            "job_id": JOB_ID,
            "run_id": manual_run_id(JOB_ID, "r1"),
            "status": "succeeded",
            "scheduled_at": day(3) + HOUR,
            "kind": "manual",
            "attempt": 1,
            **ended(3),
        },
    ]


# Newest first, one an instant: (run id, the epoch shown, the claim).
EXPECTED = [
    (timed(6, 3), None, "next (not claimed)"),
    (timed(5, 3), 3, "claimed, dispatched"),  # beside the marker 5#2
    (timed(4, 3), 3, None),  # beside the cancelled head 4#2
    (manual_run_id(JOB_ID, "r1"), None, None),
    (timed(3, 2), None, None),
    (timed(2, 1), None, None),  # its end marker is no item of its instant
    (timed(1), None, None),
]


def seed(target: Store) -> None:
    target.write([Put(RUNS, item, (), f"seed {item['run_id']}") for item in partition()])


def store(resources: Resources) -> DynamoStore:
    client = boto3.client("dynamodb", region_name="us-east-1")
    return DynamoStore(client, resources.jobs_table, resources.state_table, resources.runs_table)


@pytest.fixture(params=KINDS)
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    with build(request.param) as built:
        yield built


def test_operations_runs_lists_one_live_record_per_instant(env: Env) -> None:
    seed(env.store)
    runs = env.ops().runs(JOB_ID)
    assert [(r["run_id"], r.get("shown_epoch"), r.get("claim")) for r in runs] == EXPECTED
    assert not {r["status"] for r in runs} & {"closed", "end", "cancelled"}
    assert [r["run_id"] for r in env.ops().runs(JOB_ID, limit=2)] == [timed(6, 3), timed(5, 3)]


def test_an_instant_alone_finds_its_live_record_and_a_run_id_is_taken_whole(env: Env) -> None:
    seed(env.store)
    ops = env.ops()
    found = ops.run_at(JOB_ID, datetime(2026, 11, 4, 2, tzinfo=UTC))
    assert found is not None and found["run_id"] == timed(4, 3) and found["shown_epoch"] == 3
    assert ops.run_at(JOB_ID, datetime(2026, 11, 7, 2, tzinfo=UTC)) is None  # nothing there
    # The id of the cancelled head names that item, not its instant's record.
    whole = ops.get_run(timed(4, 2))
    assert whole is not None and whole["status"] == "cancelled"
    # Two live records at one instant (I1' broken) are named, not chosen between.
    env.store.write([Put(RUNS, run(4, 4, "failed"), (), "a second record")])
    with pytest.raises(ValueError, match="2 live records"):
        ops.run_at(JOB_ID, datetime(2026, 11, 4, 2, tzinfo=UTC))


def test_jobsched_runs_shows_one_line_per_instant_and_hides_markers(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    register(capsys, resources, tmp_path, JOB)
    seed(store(resources))
    code, out, _ = run_cli(capsys, resources, "runs", JOB_ID)
    assert code == 0
    rows = out.splitlines()[2:]  # a header and its rule first
    assert len(rows) == len(EXPECTED)
    assert rows[0].startswith("2026-11-06 02:00:00 UTC ") and "next (not claimed)" in rows[0]
    assert rows[1].startswith("2026-11-05 02:00:00 UTC #3") and "claimed, dispatched" in rows[1]
    assert rows[2].startswith("2026-11-04 02:00:00 UTC #3") and "succeeded" in rows[2]
    assert [row for row in rows if "#" in row] == rows[1:3]  # the epoch only where two meet
    assert not any(word in out for word in ("closed", "cancelled", " end "))
    assert "RuntimeError: boom" in rows[4]

    code, out, _ = run_cli(capsys, resources, "runs", JOB_ID, "--json")
    listed = json.loads(out)
    assert [(r["run_id"], r.get("shown_epoch"), r.get("claim")) for r in listed] == EXPECTED

    code, out, _ = run_cli(capsys, resources, "runs", JOB_ID, "--at", "2026-11-05T02:00:00Z")
    (row,) = out.splitlines()[2:]
    assert code == 0 and row.startswith("2026-11-05 02:00:00 UTC #3") and "claimed, dispatched" in row
    code, out, _ = run_cli(capsys, resources, "runs", JOB_ID, "--at", "2026-11-07T02:00:00Z", "--json")
    assert code == 0 and json.loads(out) == []
    code, out, _ = run_cli(capsys, resources, "runs", JOB_ID, "--at", "2026-11-07T02:00:00Z")
    assert code == 0 and out.startswith(f"no run of {JOB_ID} at 2026-11-07T02:00:00Z")


def test_jobsched_describe_lists_one_line_per_instant(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    register(capsys, resources, tmp_path, JOB)
    seed(store(resources))
    code, out, _ = run_cli(capsys, resources, "describe", JOB_ID, "--json", "--runs", "20")
    data = json.loads(out.strip().splitlines()[-1])
    assert code == 0
    assert [(r["run_id"], r.get("epoch"), r.get("claim")) for r in data["recent_runs"]] == EXPECTED
    code, screen, _ = run_cli(capsys, resources, "describe", JOB_ID, "--runs", "20")
    runs = screen.split("runs (newest first):\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(runs) == len(EXPECTED)
    assert runs[0].startswith("  2026-11-06T02:00:00Z  next (not claimed)")
    assert runs[1].startswith("  2026-11-05T02:00:00Z #3  claimed, dispatched")
    assert runs[2].startswith("  2026-11-04T02:00:00Z #3  succeeded")
    assert not any(word in screen for word in ("closed", "cancelled"))


def test_outcomes_replay_puts_records_only(capsys: pytest.CaptureFixture[str], resources: Resources) -> None:
    """Markers, end markers, cancelled heads and scheduled runs are no outcome: the publisher's
    ``TERMINAL`` keeps them out, and ``outcomes replay`` with it (one outcome per record)."""
    assert not TERMINAL & {"closed", "end", "cancelled", "scheduled"}
    seed(store(resources))
    window = ("--since", "2026-11-01T00:00:00Z", "--until", "2026-11-30T00:00:00Z")
    with pytest.raises(SystemExit) as exited:  # as run_cli, without --shard-count (no shards read)
        main(["outcomes", "replay", *window, "--dry-run", "--json", *stack_args(resources)])
    code, out = int(exited.value.code or 0), capsys.readouterr().out
    assert code == 0
    counted = json.loads(out.strip().splitlines()[-1])
    assert counted["scanned"] == len(partition())
    # day 1, day 2, day 3 (failed), day 4 (epoch 3) and the manual run.
    assert counted["outcomes"] == 5
