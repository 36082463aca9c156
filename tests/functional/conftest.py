"""Fixtures shared by the functional tests: ``env`` (the services wired on each store kind of
harness.KINDS), ``moto_server`` (one serialised moto server per module), ``aws`` (the Lambda
entry points' environment on in-process moto, with a manual clock) and ``resources`` (a stack's
tables and queues on in-process moto, for the CLI and the Python API: test_cli_ops.run_cli). A
module that needs a variant defines its own fixture of the same name, which overrides these."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from harness import KINDS, Env, build
from jobsched.core.clock import ManualClock
from jobsched_tools.emulator.local_moto import LocalMoto, start_moto_server
from jobsched_tools.emulator.provision import Resources, provision
from lambda_apps import NOW, ROOT
from moto import mock_aws


@pytest.fixture(params=KINDS)
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    with build(request.param) as built:
        yield built


@pytest.fixture(scope="module")
def moto_server() -> Iterator[LocalMoto]:
    with start_moto_server() as server:
        yield server


@pytest.fixture
def resources() -> Iterator[Resources]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        yield provision(dynamodb, sqs, prefix="cli", parameters={"ClaimShape": "legacy"})


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Resources, Any, Any, ManualClock]]:
    from jobsched.runtime import lambda_context, wiring

    clock = ManualClock(NOW)
    monkeypatch.setattr(wiring, "SystemClock", lambda: clock)
    monkeypatch.setattr(lambda_context, "SystemClock", lambda: clock)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    # One detector sweep per invocation: the manual clock does not move with real sleeps.
    monkeypatch.setenv("DETECTOR_SWEEP_SECONDS", "0")
    # In-process moto is not thread-safe: records one at a time here (the concurrent worker is
    # tested against the serialised moto server in test_worker_batch.py).
    monkeypatch.setenv("WORKER_RECORD_CONCURRENCY", "1")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Jobsched")
    # One trigger invocation claims every shard (there is no Lambda to fan out to here); the
    # fan-out tests set TRIGGER_GROUPS themselves, over these 8 shards.
    monkeypatch.setenv("SHARD_COUNT", "8")
    monkeypatch.setenv("TRIGGER_GROUPS", "1")
    monkeypatch.syspath_prepend(str(ROOT / "layers" / "handlers"))
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        resources = provision(dynamodb, sqs, prefix="lam", parameters={"ClaimShape": "legacy"})
        monkeypatch.setenv("JOBS_TABLE", resources.jobs_table)
        monkeypatch.setenv("STATE_TABLE", resources.state_table)
        monkeypatch.setenv("RUNS_TABLE", resources.runs_table)
        monkeypatch.setenv("WORK_QUEUE_URL", resources.work_queue_url)
        wiring.reset_app()
        yield resources, dynamodb, sqs, clock
        wiring.reset_app()
