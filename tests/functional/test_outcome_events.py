"""Outcome events (issue 29, part 7), at least once: every terminal write to a run record (by the
worker, the miss detector, the registrar) reaches the bus from the runs table's stream, through the
outcome publisher function as Lambda's stream mapping runs it (jobsched_tools.local.streams: in
order per shard, partial batch responses honoured, a failed invocation retried). Nothing the
writers do decides it: a publisher that dies mid-batch, or a bus that refuses some entries for a
while, costs duplicates (deduplicated on ``outcome_id``), never an outcome."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import boto3
import pytest
from harness import MINUTE, T0, Env, build, job
from jobsched.adapters.outcome_events import DETAIL_TYPES, EventBridgeOutcomeSink, outcome_detail
from jobsched.core.job import Misfire, MisfirePolicy, OverlapPolicy, RetryPolicy
from jobsched.core.run import run_id_for
from jobsched.ports import OutcomeRejection, RunOutcome
from jobsched.runtime import wiring
from jobsched.services.messages import parse_run_message
from jobsched.services.outcomes import TERMINAL
from jobsched.services.worker import Outcome, Started
from jobsched.targets.registry import RunContext
from jobsched_tools.emulator.credentials import DUMMY_AWS_ENV
from jobsched_tools.local.stack import PUBLISHER_MAPPING_ID, mapping_properties
from jobsched_tools.local.streams import Checkpoints, StreamMapping, filtered
from lambda_apps import FakeContext, load_app
from moto import mock_aws

DEADLINE = 15 * MINUTE
BUS = "ops-outcomes"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    for name, value in {
        **DUMMY_AWS_ENV,
        "AWS_DEFAULT_REGION": "us-east-1",
        "OUTCOME_EVENT_BUS_NAME": BUS,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with build("dynamodb") as built:
        for variable, table in (("JOBS_TABLE", "jobs"), ("STATE_TABLE", "state"), ("RUNS_TABLE", "runs")):
            monkeypatch.setenv(variable, built.store.table_name(table))  # type: ignore[attr-defined]
        monkeypatch.setenv("WORK_QUEUE_URL", built.queue_url or "")
        wiring.reset_app()
        yield built
        wiring.reset_app()


def boom(_ctx: RunContext) -> None:
    raise RuntimeError("target down")


def take(env: Env, job_id: str) -> list[Any]:
    return [parse_run_message(b) for b in env.receive_all() if b["job_id"] == job_id]


def terminal_writes(env: Env, *job_ids: str) -> set[tuple[str, str, int]]:
    return {
        (run["run_id"], run["status"], int(run["version"]))
        for job_id in job_ids
        for run in env.runs_of(job_id)
        if run["status"] in TERMINAL
    }


def every_outcome(env: Env) -> tuple[str, ...]:
    """Each terminal status, from every writer of one: the worker (succeeded, failed, skipped),
    the miss detector (a dead worker's run out of attempts; missed by policy after an outage) and
    the registrar (a paused job's due occurrences). Returns the job ids."""
    env.registry.add("ok", lambda _ctx: None)
    env.registry.add("boom", boom)
    once = RetryPolicy(max_attempts=1, backoff_seconds=1, jitter=False)
    ops = env.ops()
    hour = 60 * MINUTE
    env.clock.set(T0 + hour - 30_000)  # each job's next occurrence: T0 + 1 h
    ops.register(job("good", "rate(1 hour)", target="ok", overlap=OverlapPolicy.ALLOW))
    ops.register(job("bad", "rate(1 hour)", target="boom", retry=once, overlap=OverlapPolicy.ALLOW))
    ops.register(job("skipper", "rate(1 minute)", target="ok", overlap=OverlapPolicy.SKIP))
    ops.register(job("dies", "rate(1 hour)", target="ok", retry=once, overlap=OverlapPolicy.ALLOW))
    skip_all = Misfire(policy=MisfirePolicy.SKIP, grace_seconds=30)
    ops.register(job("late", "rate(1 minute)", target="ok", misfire=skip_all))
    ops.register(job("paused", "rate(1 minute)", target="ok"))
    env.clock.set(T0 + hour)
    trigger = env.trigger()
    for job_id in ("good", "bad", "skipper", "dies"):  # late and paused are never claimed
        trigger.claim_now(job_id, "t1")
    # moto's queue holds no delay here: later occurrences' messages arrive with these.
    received = [parse_run_message(body) for body in env.receive_all()]
    due = {m.job_id: m for m in received if m.scheduled_at == T0 + hour}
    worker = env.worker()
    assert worker.process(due["good"], env.clock.now_ms() + DEADLINE) is Outcome.SUCCEEDED
    assert worker.process(due["bad"], env.clock.now_ms() + DEADLINE) is Outcome.FAILED
    # skipper: its run holds the turn while the next occurrence comes due and is skipped.
    holder = worker.begin(due["skipper"], env.clock.now_ms() + DEADLINE)
    assert isinstance(holder, Started)
    # dies: its worker begins and dies; out of attempts, the detector fails the run.
    dying = env.worker("dying").begin(due["dies"], env.clock.now_ms() + DEADLINE)
    assert isinstance(dying, Started)
    env.clock.advance(MINUTE)
    trigger.claim_now("skipper", "t2")
    later = [*received, *take(env, "skipper")]
    (nxt,) = {
        m.run_id: m for m in later if m.job_id == "skipper" and m.scheduled_at == T0 + hour + MINUTE
    }.values()
    assert worker.process(nxt, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    assert worker.finish(holder, worker.execute(holder)) is Outcome.SUCCEEDED
    # late and paused: nothing claims them for ten minutes (the trigger is down).
    env.clock.advance(10 * MINUTE)
    ops.set_enabled("paused", False)  # the registrar records its due occurrences missed
    env.detector().run("d")  # late's outage: missed by policy; dies: lease lapsed, no attempts left

    return ("good", "bad", "skipper", "dies", "late", "paused")


class Bus:
    """A rule on the outcome bus that sends everything from jobsched to a queue, as a team's
    alerting would subscribe."""

    def __init__(self) -> None:
        self.events = boto3.client("events", region_name="us-east-1")
        self.sqs = boto3.client("sqs", region_name="us-east-1")
        self.events.create_event_bus(Name=BUS)
        self.url = self.sqs.create_queue(QueueName="seen")["QueueUrl"]
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])
        self.events.put_rule(Name="all", EventBusName=BUS, EventPattern=json.dumps({"source": ["jobsched"]}))
        self.events.put_targets(
            Rule="all", EventBusName=BUS, Targets=[{"Id": "q", "Arn": attributes["Attributes"]["QueueArn"]}]
        )

    def received(self) -> list[dict[str, Any]]:
        details = []
        while messages := self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10).get("Messages"):
            for message in messages:
                details.append(json.loads(message["Body"])["detail"])
                self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message["ReceiptHandle"])
        return details


def runs_stream_mapping(env: Env, invoke: Any) -> StreamMapping:
    """The runs table's stream mapped to ``invoke`` as Lambda maps it, with the template's filter
    (only records whose new image is terminal reach the function)."""
    runs = env.store.table_name("runs")  # type: ignore[attr-defined]
    arn = env.dynamodb.describe_table(TableName=runs)["Table"]["LatestStreamArn"]

    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    filters = mapping_properties(PUBLISHER_MAPPING_ID)["FilterCriteria"]["Filters"]
    patterns = [json.loads(f["Pattern"]) for f in filters]
    return StreamMapping(streams, arn, filtered(invoke, patterns), Checkpoints(arn), max_retries=10_000)


def drain(mapping: StreamMapping, rounds: int = 200) -> None:
    idle = 0
    for _ in range(rounds):
        idle = idle + 1 if mapping.poll() == 0 else 0
        if idle >= 3:  # nothing new, and no batch waiting to be retried
            return
    raise AssertionError("the stream did not drain")


def publisher_function(event: dict[str, Any]) -> Any:
    return load_app("outcome_publisher").lambda_handler(event, FakeContext("publish"))


def test_every_terminal_write_reaches_the_bus_with_its_reason(env: Env) -> None:
    bus = Bus()
    jobs = every_outcome(env)
    drain(runs_stream_mapping(env, publisher_function))

    writes = terminal_writes(env, *jobs)
    details = bus.received()
    published = Counter((d["run_id"], d["status"], d["version"]) for d in details)
    assert set(published) == writes  # every terminal write, and nothing else
    assert {status for _, status, _ in writes} == TERMINAL
    assert all(d["outcome_id"] == f"{d['run_id']}#{d['status']}#{d['version']}" for d in details)
    by_job = {d["job_id"]: d for d in details}
    assert "target down" in by_job["bad"]["reason"]
    (skip,) = [d for d in details if d["status"] == "skipped"]
    assert skip["job_id"] == "skipper" and "skip" in skip["reason"]
    assert {d["reason"] for d in details if d["job_id"] == "paused"} == {"job paused before it ran"}
    assert [d["status"] for d in details if d["job_id"] == "dies"] == ["failed"]  # by the detector
    good = by_job["good"]
    assert (good["scheduled_at"], good["attempt"], good["reason"]) == ("2026-12-01T01:00:00Z", 1, None)


def test_a_publisher_that_dies_or_a_bus_that_refuses_costs_duplicates_never_an_outcome(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    bus = Bus()
    jobs = every_outcome(env)
    put = EventBridgeOutcomeSink.publish
    calls = Counter[str]()

    def flaky(self: EventBridgeOutcomeSink, outcomes: Sequence[RunOutcome]) -> list[OutcomeRejection]:
        calls["publish"] += 1
        if calls["publish"] == 1:  # the first invocation dies after its puts landed
            put(self, outcomes)
            raise SystemExit("the function timed out after PutEvents")
        if calls["publish"] <= 4:  # then the bus throttles every other entry, three times
            rejections = put(self, [o for i, o in enumerate(outcomes) if i % 2 == 0])
            assert rejections == []
            return [
                OutcomeRejection(i, "ThrottlingException: Rate exceeded", True)
                for i in range(1, len(outcomes), 2)
            ]
        return put(self, outcomes)

    monkeypatch.setattr(EventBridgeOutcomeSink, "publish", flaky)

    def crashing_function(event: dict[str, Any]) -> Any:
        try:
            return publisher_function(event)
        except SystemExit as exc:  # as Lambda sees a crash: the invocation failed
            raise RuntimeError(str(exc)) from exc

    drain(runs_stream_mapping(env, crashing_function))
    writes = terminal_writes(env, *jobs)
    published = Counter((d["run_id"], d["status"], d["version"]) for d in bus.received())
    assert set(published) == writes  # at least once each
    assert sum(published.values()) > len(writes)  # with duplicates, which outcome_id removes
    assert calls["publish"] > 4


def test_replay_puts_a_window_s_outcomes_again_after_the_stream_lost_them(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    """The records expired from the stream unpublished (no publisher ran at all here):
    ``jobsched outcomes replay`` reads the runs table and puts every terminal outcome recorded in
    the window; ``--dry-run`` only counts them."""
    from jobsched_tools.cli.main import main

    bus = Bus()
    jobs = every_outcome(env)
    target = [
        *("--jobs-table", env.store.table_name("jobs"), "--state-table", env.store.table_name("state")),  # type: ignore[attr-defined]
        *("--runs-table", env.store.table_name("runs"), "--queue-url", env.queue_url or ""),  # type: ignore[attr-defined]
    ]
    window = ["--since", "2026-12-01T00:00:00Z", "--until", "2026-12-01T02:00:00Z"]

    def replay(*extra: str) -> dict[str, Any]:
        with pytest.raises(SystemExit) as exited:
            main(["outcomes", "replay", *window, *target, "--json", *extra])
        assert exited.value.code in (0, None)
        result: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        return result

    writes = terminal_writes(env, *jobs)
    counted = replay("--dry-run")
    assert (counted["outcomes"], counted["put"]) == (len(writes), 0)
    assert bus.received() == []
    done = replay("--bus", BUS)
    assert done["put"] == len(writes) and done["refused"] == []
    details = bus.received()
    assert {(d["run_id"], d["status"], d["version"]) for d in details} == writes
    # A window that ends before the outcomes holds none of them.
    window[-1] = "2026-12-01T00:30:00Z"
    assert replay("--bus", BUS)["put"] == 0


def test_the_event_on_the_bus_is_the_documented_one(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        events = boto3.client("events", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        events.create_event_bus(Name="ops")
        url = sqs.create_queue(QueueName="alerts")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        # What a team's alerting rule would match: failures and misses from jobsched.
        pattern = {"source": ["jobsched"], "detail-type": ["Run Failed", "Run Missed"]}
        events.put_rule(Name="failures", EventBusName="ops", EventPattern=json.dumps(pattern))
        events.put_targets(Rule="failures", EventBusName="ops", Targets=[{"Id": "q", "Arn": arn}])
        sink = EventBridgeOutcomeSink(events, "ops")
        failed = RunOutcome(run_id_for("j", T0), "j", "failed", 5, T0 + 5_000, T0, "RuntimeError: down", 3)
        succeeded = RunOutcome(run_id_for("j", T0 + MINUTE), "j", "succeeded", 4, T0 + MINUTE, T0 + MINUTE)
        assert sink.publish([failed, succeeded]) == []
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    (message,) = received  # the success does not match the rule
    event = json.loads(message["Body"])
    assert (event["source"], event["detail-type"]) == ("jobsched", "Run Failed")
    assert event["detail"] == {
        "outcome_id": "j@2026-12-01T00:00:00Z#failed#5",
        "run_id": "j@2026-12-01T00:00:00Z",
        "job_id": "j",
        "status": "failed",
        "version": 5,
        "scheduled_at": "2026-12-01T00:00:00Z",
        "recorded_at": "2026-12-01T00:00:05Z",
        "attempt": 3,
        "reason": "RuntimeError: down",
    }
    assert event["detail"] == outcome_detail(failed)
    assert set(DETAIL_TYPES.values()) == {"Run Succeeded", "Run Failed", "Run Missed", "Run Skipped"}


@pytest.mark.usefixtures("env")
def test_the_sample_event_puts_one_failure_on_the_bus() -> None:
    """events/outcome_publisher_stream.json, as `sam local invoke OutcomePublisherFunction` would
    hand it over: one run's final failure."""
    from lambda_apps import event

    bus = Bus()
    assert publisher_function(event("outcome_publisher_stream.json")) == {"batchItemFailures": []}
    (detail,) = bus.received()
    assert (detail["outcome_id"], detail["attempt"]) == ("nightly-report@2026-12-02T02:00:00Z#failed#4", 3)
    assert detail["reason"].startswith("TimeoutError")
