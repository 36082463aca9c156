"""Outcome events (issue 29, part 7): every terminal record the services write (succeeded,
failed, missed, skipped; by the worker, the miss detector and the registrar) is published once,
after its write, with its reason; a sink that fails costs a logged, counted event and never the
run; the EventBridge adapter puts the documented event on the bus (moto)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from harness import MINUTE, T0, Env, build, job
from jobsched.adapters.outcome_events import DETAIL_TYPES, EventBridgeOutcomeSink, outcome_detail
from jobsched.core.job import Misfire, MisfirePolicy, OverlapPolicy, RetryPolicy
from jobsched.core.run import run_id_for
from jobsched.ports import RunOutcome
from jobsched.runtime.outcomes import OutcomeTelemetry, scheduled_at_of
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Outcome, Started
from jobsched.targets.registry import RunContext
from moto import mock_aws

TERMINAL = {"succeeded", "failed", "missed", "skipped"}
DEADLINE = 15 * MINUTE


class ListSink:
    def __init__(self, fail: bool = False) -> None:
        self.outcomes: list[RunOutcome] = []
        self.fail = fail

    def publish(self, outcome: RunOutcome) -> None:
        if self.fail:
            raise ConnectionError("bus unreachable")
        self.outcomes.append(outcome)


@pytest.fixture
def env() -> Iterator[Env]:
    with build("memory") as built:
        yield built


def with_sink(env: Env, sink: ListSink) -> None:
    env.telemetry = OutcomeTelemetry(env.telemetry, sink, env.clock)  # type: ignore[assignment]


def boom(_ctx: RunContext) -> None:
    raise RuntimeError("target down")


def take(env: Env, job_id: str) -> list[Any]:
    return [parse_run_message(b) for b in env.receive_all() if b["job_id"] == job_id]


def terminal_records(env: Env, *job_ids: str) -> Counter[tuple[str, str]]:
    return Counter(
        (run["run_id"], run["status"])
        for job_id in job_ids
        for run in env.runs_of(job_id)
        if run["status"] in TERMINAL
    )


def test_every_terminal_record_is_published_once_with_its_reason(env: Env) -> None:
    sink = ListSink()
    with_sink(env, sink)
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
    due = {m.job_id: m for m in map(parse_run_message, env.receive_all()) if m.scheduled_at == T0 + hour}
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
    (nxt,) = [m for m in take(env, "skipper") if m.scheduled_at == T0 + hour + MINUTE]
    assert worker.process(nxt, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    assert worker.finish(holder, worker.execute(holder)) is Outcome.SUCCEEDED
    # late and paused: nothing claims them for ten minutes (the trigger is down).
    env.clock.advance(10 * MINUTE)
    ops.set_enabled("paused", False)  # the registrar records its due occurrences missed
    env.detector().run("d")  # late's outage: missed by policy; dies: lease lapsed, no attempts left

    records = terminal_records(env, "good", "bad", "skipper", "dies", "late", "paused")
    published = Counter((o.run_id, o.status) for o in sink.outcomes)
    assert published == records  # each terminal record, once
    assert {status for _, status in records} == TERMINAL
    failed_by_detector = [o for o in sink.outcomes if o.job_id == "dies"]
    assert [o.status for o in failed_by_detector] == ["failed"]
    by_status = {o.status: o for o in sink.outcomes}
    assert "target down" in str([o.reason for o in sink.outcomes if o.job_id == "bad"])
    assert by_status["skipped"].reason and "skip" in by_status["skipped"].reason
    paused = {o.reason for o in sink.outcomes if o.job_id == "paused"}
    assert paused == {"job paused before it ran"}
    assert all(o.reason for o in sink.outcomes if o.job_id == "late")
    good = next(o for o in sink.outcomes if o.job_id == "good")
    assert (good.scheduled_at, good.attempt, good.reason) == (T0 + 3600_000, 1, None)
    assert all(o.outcome_id == f"{o.run_id}#{o.status}" for o in sink.outcomes)


def test_a_failing_sink_is_logged_and_counted_and_never_fails_the_run(env: Env) -> None:
    inner = env.telemetry
    with_sink(env, ListSink(fail=True))
    env.registry.add("ok", lambda _ctx: None)
    env.ops().register(job("good", "rate(1 hour)", target="ok"))
    env.receive_all()
    env.clock.set(T0 + 3600_000)
    env.trigger().tick("t")
    (message,) = take(env, "good")
    assert env.worker().process(message, env.clock.now_ms() + DEADLINE) is Outcome.SUCCEEDED
    assert env.run(message.run_id)["status"] == "succeeded"
    failures = inner.named("outcome.publish_failed")
    assert [(e.correlation_id, e.fields["status"]) for e in failures] == [(message.run_id, "succeeded")]
    assert "bus unreachable" in failures[0].fields["error"]
    assert inner.metric_sum("OutcomeEventFailures") == 1


def test_the_run_id_gives_the_instant_of_a_scheduled_run_only() -> None:
    assert scheduled_at_of(run_id_for("j", T0)) == T0
    assert scheduled_at_of("j@manual:req-1") is None


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
        failed = RunOutcome(run_id_for("j", T0), "j", "failed", T0 + 5_000, T0, "RuntimeError: down", 3)
        sink.publish(failed)
        sink.publish(RunOutcome(run_id_for("j", T0 + MINUTE), "j", "succeeded", T0 + MINUTE, T0 + MINUTE))
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    (message,) = received  # the success does not match the rule
    event = json.loads(message["Body"])
    assert (event["source"], event["detail-type"]) == ("jobsched", "Run Failed")
    assert event["detail"] == {
        "outcome_id": "j@2026-12-01T00:00:00Z#failed",
        "run_id": "j@2026-12-01T00:00:00Z",
        "job_id": "j",
        "status": "failed",
        "scheduled_at": "2026-12-01T00:00:00Z",
        "recorded_at": "2026-12-01T00:00:05Z",
        "attempt": 3,
        "reason": "RuntimeError: down",
    }
    assert event["detail"] == outcome_detail(failed)
    assert set(DETAIL_TYPES.values()) == {"Run Succeeded", "Run Failed", "Run Missed", "Run Skipped"}
