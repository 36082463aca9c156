"""One job never holds up another (issue 12, items 1, 2 and 9; issue 13, item 6): a job whose
processing fails, a transient error, a claim whose response was lost, an outage of a job with a
large payload (DynamoDB's and SQS's size limits, enforced by the in-memory store and queue), a
message no jobsched sender would send."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from harness import KINDS, MINUTE, T0, Env, build, default_cfg, job, seed_active
from jobsched.core.errors import ConditionFailed, TransientStoreError
from jobsched.core.job import Misfire, MisfirePolicy, OverlapPolicy
from jobsched.core.limits import SQS_MAX_BATCH_BYTES, item_size
from jobsched.core.run import RunMessage, encode_body, run_id_for, run_key
from jobsched.core.writes import JOBS, RUNS, Item, Put, Update, WriteOp
from jobsched.ports import OutgoingMessage, SendResult
from jobsched.services.detector import MissDetector
from jobsched.services.messages import PoisonMessage
from jobsched.services.trigger import Trigger

HOUR = 60 * MINUTE


@pytest.fixture(params=KINDS)
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    with build(request.param, default_cfg(lookahead_seconds=10)) as built:
        yield built


class Wrapped:
    """The environment's store, with hooks on its reads and writes."""

    def __init__(self, env: Env) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env.store, name)

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        self.on_get(table, key)
        return self.env.store.get(table, key, consistent)

    def write(self, ops: Sequence[WriteOp]) -> None:
        self.on_write(ops)

    def on_get(self, table: str, key: Item) -> None:
        pass

    def on_write(self, ops: Sequence[WriteOp]) -> None:
        self.env.store.write(ops)


def trigger_on(env: Env, store: Any) -> Trigger:
    return Trigger(store, env.queue, env.telemetry, env.clock, env.cfg, parallel_queries=False)


def due_jobs(env: Env, *job_ids: str) -> None:
    for job_id in job_ids:
        seed_active(env, job(job_id, overlap=OverlapPolicy.ALLOW), T0)


def test_a_job_that_fails_in_the_trigger_is_logged_counted_and_left_due(env: Env) -> None:
    due_jobs(env, "a", "broken", "z")

    class Broken(Wrapped):
        def on_get(self, table: str, key: Item) -> None:
            if table == JOBS and key["job_id"] == "broken":
                raise RuntimeError("a bug in one job's path")

    result = trigger_on(env, Broken(env)).tick("t")
    assert (result.claimed, result.job_errors) == (2, 1)
    (error,) = env.telemetry.named("job.error")
    assert error.correlation_id == "broken" and "a bug in one job's path" in error.fields["error"]
    assert env.telemetry.metric_sum("JobErrors") == 1
    assert env.state("broken")["next_run_at"] == T0  # still due: the next tick tries again
    assert env.trigger().tick("t2").claimed == 1


def test_a_job_that_fails_in_the_detector_does_not_stop_the_others(env: Env) -> None:
    misfire = Misfire(policy=MisfirePolicy.SKIP)
    for job_id in ("a", "broken", "z"):
        seed_active(env, job(job_id, misfire=misfire), T0)
    env.clock.set(T0 + 10 * MINUTE)

    class Broken(Wrapped):
        def on_get(self, table: str, key: Item) -> None:
            if table == JOBS and key["job_id"] == "broken":
                raise RuntimeError("a bug in one job's path")

    detector = MissDetector(Broken(env), env.queue, env.telemetry, env.clock, env.cfg, False)  # type: ignore[arg-type]
    result = detector.run("d")
    assert result.job_errors == 1 and result.jobs_caught_up == 2
    assert env.state("a")["next_run_at"] > T0 and env.state("broken")["next_run_at"] == T0
    assert env.detector().run("d2").jobs_caught_up == 1  # the next run settles it


def test_a_transient_error_is_retried_for_that_job_alone(env: Env) -> None:
    due_jobs(env, "a", "flaky")

    class Flaky(Wrapped):
        failed = False

        def on_get(self, table: str, key: Item) -> None:
            if table == JOBS and key["job_id"] == "flaky" and not self.failed:
                self.failed = True
                raise TransientStoreError("read timeout")

    result = trigger_on(env, Flaky(env)).tick("t")
    assert (result.claimed, result.transient, result.job_errors) == (2, 1, 0)


@pytest.mark.parametrize("then", ["lost response", "retried by botocore"])
def test_a_claim_whose_first_attempt_landed_is_recognised_and_sent(env: Env, then: str) -> None:
    due_jobs(env, "a")

    class LandsThenFails(Wrapped):
        def on_write(self, ops: Sequence[WriteOp]) -> None:
            self.env.store.write(ops)  # the claim lands ...
            if then == "lost response":
                raise TransientStoreError("read timeout after the write")
            self.env.store.write(ops)  # ... and the SDK's retry of it fails its condition

    result = trigger_on(env, LandsThenFails(env)).tick("t")
    assert (result.claimed, result.dispatched, result.conflicts) == (1, 1, 0)
    assert [m.body["run_id"] for m in env.queue.sent] == [run_id_for("a", T0)]


def test_a_racer_s_claim_is_not_taken_for_our_own(env: Env) -> None:
    due_jobs(env, "a")

    class RacerFirst(Wrapped):
        def on_write(self, ops: Sequence[WriteOp]) -> None:
            if any(op.label == "create run" for op in ops):
                other = Trigger(
                    self.env.store, self.env.queue, self.env.telemetry, self.env.clock, self.env.cfg, False
                )
                assert other.tick("racer").claimed == 1
            self.env.store.write(ops)

    result = trigger_on(env, RacerFirst(env)).tick("t")
    assert result.claimed == 0
    assert [m.body["run_id"] for m in env.queue.sent] == [run_id_for("a", T0)]  # sent once, by the racer


def test_a_long_outage_of_a_job_with_a_large_payload_is_settled_within_the_limits() -> None:
    """50 KB payloads, 150 catch-up runs after an outage: one transaction would be 7.5 MB and one
    batch 500 KB. The in-memory store and queue reject requests past DynamoDB's 4 MB and SQS's
    256 KiB, as AWS would, so the settle chunks and the dispatch batches must be sized by bytes."""
    with build("memory") as env:
        batches: list[int] = []
        inner = env.queue.inner

        class Measuring:
            def send(self, messages: Sequence[OutgoingMessage]) -> SendResult:
                batches.append(sum(len(encode_body(m.body).encode()) for m in messages))
                return inner.send(messages)

        env.queue.inner = Measuring()
        big = job(
            "big",
            payload={"blob": "x" * 50_000},
            misfire=Misfire(policy=MisfirePolicy.RUN_ALL, max_catchup=200, grace_seconds=60),
            overlap=OverlapPolicy.ALLOW,
        )
        seed_active(env, big, T0)
        env.clock.set(T0 + 150 * MINUTE)
        result = env.detector().run("d")
        assert result.catchups_started >= 149 and result.job_errors == 0
        runs = env.runs_of("big")
        # A run item holds the definition's digest, not the payload; each message carries it.
        assert len(runs) == 152 and all(item_size(r) < 2_000 for r in runs)
        assert all(len(encode_body(m.body)) > 50_000 for m in env.queue.sent)
        assert len(env.queue.sent) == len(runs) and max(batches) <= SQS_MAX_BATCH_BYTES
        assert len(batches) >= len(runs) / 5  # at most five 50 KB messages fit one batch


def test_the_stores_refuse_what_dynamodb_would(env: Env) -> None:
    """The misfire chunk the old detector wrote (99 runs, each with a 50 KB definition) is past
    DynamoDB's 4 MB: both stores refuse it before sending, as DynamoDB would (moto would not)."""
    runs = [{**run_key(f"j@r{i}"), "definition": {"payload": "x" * 50_000}} for i in range(99)]
    with pytest.raises(ValueError, match="4 MB"):
        env.store.write(
            [Update("state", {"job_id": "j"}, (), "advance"), *[Put(RUNS, r, (), "p") for r in runs]]
        )


def test_a_message_no_sender_would_send_goes_to_the_dead_letter_queue(env: Env) -> None:
    seed_active(env, job("f"), T0)
    far = RunMessage(
        run_id=run_id_for("f", T0 + 2 * HOUR),
        job_id="f",
        version=1,
        attempt=1,
        scheduled_at=T0 + 2 * HOUR,
        definition=job("f").to_item(),
    )
    with pytest.raises(PoisonMessage, match="900 s"):
        env.worker().begin(far, T0 + 60_000)
    forged = far.model_copy(
        update={
            "run_id": run_id_for("f", T0),
            "scheduled_at": T0,
            "definition": {**job("f").to_item(), "payload": "{not json"},
        }
    )
    with pytest.raises(PoisonMessage, match="payload"):
        env.worker().begin(forged, T0 + 60_000)


def test_a_conflicting_write_is_a_condition_failure_not_a_crash(env: Env) -> None:
    """The registrar's writes race people's: a lost race is read again, never raised."""
    due_jobs(env, "a")

    class PersonWritesFirst(Wrapped):
        done = False

        def on_write(self, ops: Sequence[WriteOp]) -> None:
            if not self.done:
                self.done = True
                raise ConditionFailed(0, ops[0], None)
            self.env.store.write(ops)

    assert trigger_on(env, PersonWritesFirst(env)).tick("t").claimed == 1
