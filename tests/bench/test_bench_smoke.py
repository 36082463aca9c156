"""Smoke test of ``jobsched bench --quick`` at tiny sizes: every key is there with a sane type, and
the exact request counts per run match the design. No wall-clock assertions.

The three phases that start interpreters of their own (the cold imports, the peak memory of each
function, the fan-out's spawned triggers) run for real in their own files
(test_bench_subprocess_phases.py, test_fanout_bench.py), which pytest-xdist runs beside this one:
in one test they passed its 300 s timeout on two loaded cores (issue 35 item 15). Here they are
stand-ins of the same shape, so this test checks how the bench puts their figures in its JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from jobsched_tools.bench import cold_import, fanout, memory, read_units, stack_shapes, units
from jobsched_tools.cli.main import main

KEYS = {
    "raw_conditional_writes_per_s": float,
    "dispatch_runs_per_s": float,
    "dispatch_efficiency": float,
    "claim_transactions_per_s": float,
    "dispatch_vs_claim_ceiling": float,
    "claim_vs_raw_write": float,
    "ddb_write_requests_per_run": float,
    "ddb_read_requests_per_run": float,
    "sqs_requests_per_run": float,
    "est_write_units_per_run": float,
    "est_write_units_per_run_skip": float,
    "est_write_units_per_heartbeat": float,
    "est_write_units_per_run_4k_payload": float,
    "registrar_records_per_run": float,
    "lag_ms_p99_first_occurrence": float,
    "lag_ms_p99_steady_defaults": float,
    "usd_per_million_runs": float,
    "usd_per_million_runs_provisioned": float,
    "baseline_usd_per_million_runs": float,
    "baseline_usd_per_million_runs_provisioned": float,
    "lag_ms_p50": float,
    "lag_ms_p99": float,
    "recovery_s_p50": float,
    "recovery_s_max": float,
    "trigger_cpu_ms_per_run": float,
    "bare_write_cpu_ms": float,
    "worker_cpu_ms_per_run": float,
    "worker_wait_s_per_batch": float,
    "modelled_runs_per_s_default": float,
    "modelled_runs_per_s_max": float,
    "idle_usd_per_month": float,
}


def _cold_imports(runs: int) -> dict[str, object]:
    per_function = dict.fromkeys(cold_import.FUNCTIONS, 90.0)
    return {
        "cold_import_ms": per_function,
        "cold_import_ms_bare_boto3": 60.0,
        "cold_import_overhead_ms": dict.fromkeys(cold_import.FUNCTIONS, 30.0),
        "cold_first_call_ms": per_function,
        "cold_import_runs": runs,
    }


def _peaks() -> dict[str, object]:
    return {
        "peak_rss_mb": dict.fromkeys(memory.FUNCTIONS, 120.0),
        "baseline_rss_mb": dict.fromkeys(memory.FUNCTIONS, 80.0),
    }


def _fanout(*_args: object) -> dict[str, object]:
    rates = dict.fromkeys(map(str, fanout.PROCESS_COUNTS), 1.0)
    return {"fanout_runs_per_s": rates, "fanout_scaling_ratio": 1.0}


def test_quick_bench_json(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.setattr(cold_import, "measure", _cold_imports)
    monkeypatch.setattr(memory, "measure", _peaks)
    monkeypatch.setattr(fanout, "measure", _fanout)
    argv = [
        "bench",
        "--quick",
        "--json",
        "--raw-writes=20",
        "--dispatch-runs=20",
        "--count-runs=10",
        "--lag-seconds=2",
        "--crashes=1",
        "--lease-seconds=5",
    ]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    for key, kind in KEYS.items():
        assert key in result, key
        assert isinstance(result[key], int | float), (key, result[key])
        if kind is int:
            assert float(result[key]).is_integer(), (key, result[key])
        assert math.isfinite(result[key]) and result[key] >= 0, (key, result[key])

    # Idle cost (issue 27 item 7): per function and in total, at most $2 a month.
    assert set(result["idle_usd_per_month_by_function"]) == {
        "trigger",
        "worker",
        "miss_detector",
        "registrar",
        "outcome_publisher",
    }
    assert result["idle_usd_per_month"] <= 2.0

    # The subprocess phases' figures, as measured (stand-ins here): in the JSON as they came.
    assert result["peak_rss_mb"] == _peaks()["peak_rss_mb"]
    assert result["cold_import_ms"] == _cold_imports(1)["cold_import_ms"]
    assert result["fanout_scaling_ratio"] == 1.0

    # The design: start = UpdateItem, commit = UpdateItem, and the claim one request: on a legacy
    # stack one TransactWriteItems (the run's put and the job's advance, issue 25), on a successor
    # stack (the template's default) one PutItem of the next head (design.md, the successor claim).
    allow = result["by_overlap"]["allow"]
    assert allow["succeeded"] == 10
    assert result["ddb_write_requests_per_run"] == 3
    claim, other = "dynamodb:TransactWriteItems", "dynamodb:PutItem"
    if stack_shapes.shipped() is stack_shapes.SUCCESSOR:
        claim, other = other, claim
    assert allow["requests"][claim] == 10
    assert allow["requests"]["dynamodb:UpdateItem"] == 20
    assert other not in allow["requests"]
    # The overlap chain (design.md): skip, the default, makes the same writes.
    skip = result["by_overlap"]["skip"]
    assert skip["ddb_write_requests_per_run"] == 3
    assert skip["requests"][claim] == allow["requests"][claim]
    assert skip["requests"]["dynamodb:UpdateItem"] == allow["requests"]["dynamodb:UpdateItem"]
    # The event source mapping: one receive and one batch delete per 10 messages, one send per 10.
    assert allow["requests"]["sqs:SendMessageBatch"] == 1
    assert allow["requests"]["sqs:ReceiveMessage"] == 1
    assert allow["requests"]["sqs:DeleteMessageBatch"] == 1
    assert result["sqs_requests_per_run"] == pytest.approx(0.3)
    # Reads: only the trigger's index queries, one per shard.
    assert allow["requests"]["dynamodb:Query"] == result["settings"]["shard_count"]
    assert result["counts"]["dispatch"]["dispatched"] == 20
    # The efficiency is the product of its two parts, each measured in the same run.
    split = result["dispatch_vs_claim_ceiling"] * result["claim_vs_raw_write"]
    assert split == pytest.approx(result["dispatch_efficiency"], rel=0.02)
    assert result["counts"]["crashes"] == result["counts"]["recovered"] == 1
    assert result["counts"]["lag_started"] == result["counts"]["lag_occurrences"]

    # Every read a run makes is priced (issue 37): the bench's read units per run are the meter's
    # (the trigger's job item and pages, the worker's run before it, the detector's share), and
    # both capacity modes price them.
    metered = read_units.measure(result["usd_per_million_runs_policy"]).read_units_per_run
    assert result["est_read_units_per_run"] == metered
    assert sum(result["est_read_units_per_run_by_reader"].values()) == pytest.approx(metered, abs=1e-3)
    prices, _ = units.load_prices()
    # The bench meters what ships (issue 37): its headline units are the template's default
    # shape's, and every shape is priced beside it, from the same meter.
    assert result["claim_shape"] == stack_shapes.shipped().name
    assert set(result["by_claim_shape"]) == {shape.name for shape in stack_shapes.SHAPES}
    shipped = result["by_claim_shape"][result["claim_shape"]]
    assert shipped["write_units_per_run"] == result["est_write_units_per_run_skip"]
    for mode, key in (
        ("on_demand", "usd_per_million_runs_by_service"),
        ("provisioned", "usd_per_million_runs_provisioned_by_service"),
    ):
        read_usd = units.unit_prices(prices, mode)[1]
        assert result[key]["dynamodb_reads"] == pytest.approx(metered * read_usd, abs=1e-4), mode


def test_cost_formula() -> None:
    cost = units.usd_per_million_runs(units.CostInputs(2, 0, 0, 0), units.DEFAULT_PRICES)
    assert cost["total"] == pytest.approx(1.25)


def test_the_price_source_is_recorded_relative_to_the_project(tmp_path: Path) -> None:
    """docs/bench-latest.json is committed: no absolute path of the machine that ran the bench."""
    _, source = units.load_prices(units.find_prices(Path(__file__).resolve().parent))
    assert source == "config/prices.toml"
    elsewhere = tmp_path / "prices.toml"
    elsewhere.write_text("")
    assert not Path(units.project_relative(elsewhere)).is_absolute()


@pytest.mark.parametrize("seconds_before_the_hour", [30, 89, 3599])
def test_a_bench_job_comes_due_once_whatever_the_hour(seconds_before_the_hour: int) -> None:
    """The bench's recurring jobs (``scheduled_job``) are due at due_ms and next an hour on, not at
    the next full hour: run within the trigger's lookahead of an hour, a tick claimed each job
    twice and the quick bench counted 20 runs for 10 jobs."""
    from datetime import UTC, datetime, timedelta

    from jobsched.core.config import SchedulerConfig
    from jobsched.core.job import JobDefinition
    from jobsched_tools.bench.stack import scheduled_job

    hour = datetime(2026, 12, 5, 1, tzinfo=UTC)
    due = hour - timedelta(seconds=seconds_before_the_hour, milliseconds=-123)
    item, state = scheduled_job("c1", int(due.timestamp() * 1000), SchedulerConfig(), at=False)
    assert state["next_run_at"] == int(due.timestamp() * 1000)
    following = JobDefinition.from_item(item).compiled_schedule().next_after(due)
    assert following is not None and following - due >= timedelta(minutes=59)
