"""The counts phase (bench/counts.py) on each stack shape it runs, on moto: every request a run
makes, counted on the clients, beside the meter's units for the same shape. On a successor stack
the claim is a plain put (no transaction) and the state table is never written."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from jobsched.core.claim_shape import DeployedShape
from jobsched_tools.bench import cpu, write_units
from jobsched_tools.bench.counts import measure_counts
from jobsched_tools.bench.stack import BenchSettings, Servers, bench_config
from jobsched_tools.bench.stack_shapes import LEGACY, SUCCESSOR
from jobsched_tools.emulator.credentials import DUMMY_AWS_ENV
from jobsched_tools.emulator.local_moto import start_moto_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with pytest.MonkeyPatch.context() as patch:
        for key, value in DUMMY_AWS_ENV.items():
            patch.setenv(key, value)
        moto = Servers(start_moto_process(fast_transactions=True), start_moto_process())
        try:
            yield moto
        finally:
            moto.stop()


def test_a_successor_run_is_three_plain_writes_and_no_state_write(servers: Servers) -> None:
    cfg = bench_config(BenchSettings())
    counts = measure_counts(servers, 10, "skip", cfg, shape=SUCCESSOR)
    legacy = measure_counts(servers, 10, "skip", cfg, shape=LEGACY)
    assert counts["succeeded"] == legacy["succeeded"] == 10
    requests = counts["requests"]
    # The claim is one PutItem of the next head; the start and the commit an UpdateItem each.
    assert "dynamodb:TransactWriteItems" not in requests
    assert requests["dynamodb:PutItem"] == 10 and requests["dynamodb:UpdateItem"] == 20
    assert counts["ddb_write_requests_per_run"] == legacy["ddb_write_requests_per_run"] == 3
    # Each claim reads the head's successor key before its put: one GetItem more a run.
    assert counts["ddb_read_requests_per_run"] > legacy["ddb_read_requests_per_run"]
    assert counts["claim_shape"] == SUCCESSOR.name
    metered = write_units.measure("skip", runs=20, heartbeats=1, shape=SUCCESSOR)
    assert counts["est_write_units_per_run"] == metered.write_units_per_run
    assert counts["sqs_requests_per_run"] == pytest.approx(legacy["sqs_requests_per_run"])


def test_the_cpu_phase_dispatches_and_runs_every_head_of_a_successor_stack(servers: Servers) -> None:
    """bench/cpu.py on the template's default shape: a real tick claims every head once and the
    worker starts and commits each run (no timing asserted)."""
    figures = cpu.measure(servers, runs=12, bare_writes=5, shape=DeployedShape.SUCCESSOR)
    assert figures.dispatched == figures.runs == 12
    assert figures.trigger_cpu_ms_per_run > 0 and figures.worker_cpu_ms_per_run > 0
