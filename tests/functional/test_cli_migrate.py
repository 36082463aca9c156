"""``jobsched migrate successor-claim [--check]`` end to end on moto (issue 37, build plan §5): the
switch is refused unless the stack is deployed ``ClaimShape=migrating`` (the message says what to
deploy); ``--check`` reports §5's conditions and exits non-zero until the switch is on and the
reconcile pass has converted every legacy state. The whole migration: a legacy stack with runs in
flight, deployed ``migrating``, switched, checked, deployed ``successor``: every occurrence once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.core.claim_shape import ClaimShape, stack_shape
from jobsched.core.clock import ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY
from jobsched.core.writes import STATE
from jobsched.services.reconciler import Reconciler
from jobsched.services.registrar import Registrar
from jobsched_tools.cli.main import main
from jobsched_tools.emulator.claim_indexes import deploy_claim_indexes
from jobsched_tools.emulator.provision import Resources, provision
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from moto import mock_aws

SHARDS = 4


@pytest.fixture
def due_resources() -> Iterator[Resources]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        yield provision(
            dynamodb, sqs, prefix="cli", parameters={"ClaimShape": "legacy"}, extra_indexes=("due",)
        )


def stack_args(resources: Resources) -> list[str]:
    return [
        "--jobs-table",
        resources.jobs_table,
        "--state-table",
        resources.state_table,
        "--runs-table",
        resources.runs_table,
        "--queue-url",
        resources.work_queue_url,
        "--shard-count",
        str(SHARDS),
    ]


def run_cli(capsys: pytest.CaptureFixture[str], resources: Resources, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main([*args, *stack_args(resources)])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def store(resources: Resources) -> DynamoStore:
    client = boto3.client("dynamodb", region_name="us-east-1")
    return DynamoStore(client, resources.jobs_table, resources.state_table, resources.runs_table)


def switch(resources: Resources) -> ClaimShape:
    return stack_shape(store(resources).get(STATE, dict(BOOKKEEPING_KEY)))


def conditions(out: str) -> dict[str, Any]:
    data = json.loads(out.strip().splitlines()[-1])
    return {c["name"]: c["holds"] for c in data["conditions"]} | {"ready": data["ready"]}


def test_the_switch_is_refused_without_the_due_index(
    capsys: pytest.CaptureFixture[str], resources: Resources
) -> None:
    code, _, err = run_cli(capsys, resources, "migrate", "successor-claim")
    assert code == 2
    assert err.startswith("error: ") and "no 'due' index" in err and "ClaimShape=migrating first" in err
    assert switch(resources) is ClaimShape.LEGACY  # nothing written
    code, out, _ = run_cli(capsys, resources, "migrate", "successor-claim", "--check", "--json")
    assert code == 1 and conditions(out)["due index"] is False and conditions(out)["deployed"] is False


def test_the_switch_is_refused_on_a_successor_stack(
    capsys: pytest.CaptureFixture[str], resources: Resources
) -> None:
    client = boto3.client("dynamodb", region_name="us-east-1")
    tables = {"state": resources.state_table, "runs": resources.runs_table}
    assert deploy_claim_indexes(client, tables, "successor")
    code, _, err = run_cli(capsys, resources, "migrate", "successor-claim")
    assert code == 2 and "deployed ClaimShape=successor" in err and "no switch to set" in err
    assert switch(resources) is ClaimShape.LEGACY  # nothing written
    code, out, _ = run_cli(capsys, resources, "migrate", "successor-claim", "--check", "--json")
    found = conditions(out)  # and no query of next-run or lease, which the tables lack
    assert code == 1 and found["deployed"] is False and "next-run empty" not in found


def test_check_before_and_after_the_switch_and_the_reconcile_pass(
    capsys: pytest.CaptureFixture[str], due_resources: Resources, tmp_path: Path
) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"job_id": "nightly", "schedule": "cron(0 3 * * ? *)", "target": "log"}))
    code, _, _ = run_cli(capsys, due_resources, "register", str(spec))
    assert code == 0
    # Before: the switch is off, and the job's state is in next-run.
    code, out, _ = run_cli(capsys, due_resources, "migrate", "successor-claim", "--check", "--json")
    found = conditions(out)
    assert code == 1 and found["due index"] is True and found["new code"] is None
    assert found["switch"] is False and found["legacy states"] is False and found["next-run empty"] is False
    # The switch.
    code, out, _ = run_cli(capsys, due_resources, "migrate", "successor-claim")
    assert code == 0 and "switch set" in out and switch(due_resources) is ClaimShape.SUCCESSOR
    code, out, _ = run_cli(capsys, due_resources, "migrate", "successor-claim")
    assert code == 0 and "on already" in out
    code, out, _ = run_cli(capsys, due_resources, "migrate", "successor-claim", "--check", "--json")
    found = conditions(out)
    assert code == 1 and found["switch"] is True and found["legacy states"] is False
    # A reconcile pass converts the legacy state (on moto's tables): every condition holds.
    tables = store(due_resources)
    clock = ManualClock(int(time.time() * 1000))
    cfg = SchedulerConfig(shard_count=SHARDS)
    registrar = Registrar(tables, MemoryTelemetry(), clock, cfg)
    done = Reconciler(tables, MemoryTelemetry(), clock, cfg, registrar).run(lambda: True)
    assert done.legacy_states == 1 and done.converted == 1
    code, out, _ = run_cli(capsys, due_resources, "migrate", "successor-claim", "--check", "--json")
    found = conditions(out)
    assert code == 1 and found["legacy states"] is True and found["next-run empty"] is True
    assert found["reconcile pass"] is False  # it met one: a whole pass that meets none is needed
    done = Reconciler(tables, MemoryTelemetry(), clock, cfg, registrar).run(lambda: True)
    assert done.legacy_states == 0 and done.passes_completed == 1
    code, out, _ = run_cli(capsys, due_resources, "migrate", "successor-claim", "--check")
    assert code == 0, out
    assert "ready for deploy 2" in out and "the last whole reconcile pass counted 0" in out
    assert "unfinished" not in _help(capsys).lower()


def _help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        main(["migrate", "successor-claim", "--help"])
    return " ".join(capsys.readouterr().out.split())


# --- the whole migration -----------------------------------------------------------------------


def test_a_legacy_stack_with_runs_in_flight_migrates_and_runs_every_occurrence_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A legacy stack (deployed ``ClaimShape=legacy``) with claimed runs in flight is deployed
    ``migrating`` (deploy 1 adds ``due``), switched with the CLI, ticked and swept until ``--check``
    reports ready, then deployed ``successor`` (deploy 2 deletes ``next-run`` and ``lease``), after
    which the services, wired with each deploy's shape, never query an index the tables lack (moto
    refuses it). Every occurrence due in the 12 minutes runs exactly once."""
    from harness import MINUTE, T0, Counter, Env, build, default_cfg, job
    from jobsched.core.claim_shape import DeployedShape
    from jobsched.core.run import parse_run_id

    def args(env: Env) -> list[str]:
        store = env.store
        assert isinstance(store, DynamoStore)
        names = ("jobs", "state", "runs")
        tables = [f"--{name}-table={store.table_name(name)}" for name in names]
        return [*tables, f"--queue-url={env.queue_url}", f"--shard-count={env.cfg.shard_count}"]

    def cli(env: Env, *command: str) -> tuple[int, str]:
        with pytest.raises(SystemExit) as exited:
            main([*command, *args(env)])
        out, _ = capsys.readouterr()
        return int(exited.value.code or 0), out

    def minute(env: Env) -> None:
        env.clock.advance(MINUTE)
        assert env.trigger().tick("tick").job_errors == 0
        env.drain(env.worker())
        assert env.detector().run("sweep").job_errors == 0
        env.drain(env.worker())

    counter = Counter()
    jobs = {"every1": "rate(1 minute)", "every2": "rate(2 minutes)", "every3": "rate(3 minutes)"}
    with build("dynamodb", cfg=default_cfg(shard_count=2)) as env:
        assert env.shape is DeployedShape.LEGACY
        env.registry.register("t")(counter)
        for job_id, schedule in jobs.items():
            env.ops().register(job(job_id, schedule))
        minute(env)
        env.clock.advance(MINUTE)
        assert env.trigger().tick("in flight").claimed >= 1  # claimed and sent, not yet run
        # Deploy 1: due added; the functions read the switch from now on.
        assert env.redeploy(DeployedShape.MIGRATING) == ["+due on t-runs"]
        code, out = cli(env, "migrate", "successor-claim")
        assert code == 0 and "switch set" in out
        code, out = cli(env, "migrate", "successor-claim", "--check", "--json")
        assert code == 1 and conditions(out)["legacy states"] is False
        for _ in range(3):
            minute(env)
        code, out = cli(env, "migrate", "successor-claim", "--check", "--json")
        assert code == 0 and conditions(out)["ready"], out
        # Deploy 2: next-run and lease deleted.
        assert env.redeploy(DeployedShape.SUCCESSOR) == ["-lease on t-runs", "-next-run on t-state"]
        for _ in range(6):
            minute(env)
        end = env.clock.now_ms()
        ran: dict[tuple[str, int], int] = {}
        for run_id in counter.calls:
            parts = parse_run_id(run_id)
            assert parts.instant_ms is not None
            ran[(parts.job_id, parts.instant_ms)] = ran.get((parts.job_id, parts.instant_ms), 0) + 1
        assert all(count == 1 for count in ran.values()), {k: n for k, n in ran.items() if n > 1}
        for job_id, every in (("every1", 1), ("every2", 2), ("every3", 3)):
            due = range(T0 + every * MINUTE, end - MINUTE + 1, every * MINUTE)
            assert [at for at in due if (job_id, at) not in ran] == [], job_id
