"""The overlap chain under the races that could break it: a claim made from a stale read of its
job, and a manual run joining the chain between a tick's read and its claim."""

from __future__ import annotations

from typing import Any

import pytest
from harness import T0, Env, build, job, seed_active
from jobsched.core.errors import Throttled
from jobsched.core.job import OverlapPolicy
from jobsched.core.run import RunMessage
from jobsched.core.writes import WriteOp
from jobsched.services.messages import parse_run_message
from jobsched.services.trigger import Trigger
from jobsched.services.worker import Outcome, Started

DEADLINE = 900_000


@pytest.fixture
def env() -> Any:
    with build("memory") as env:
        yield env


class ManualRunBeforeTheClaim:
    """The store, with a person's manual run landing just before the tick's first run write:
    the tick read the job before the run joined the chain."""

    def __init__(self, env: Env, job_id: str) -> None:
        self._env = env
        self._job_id = job_id
        self.manual_run_id: str | None = None

    def write(self, ops: list[WriteOp]) -> None:
        if self.manual_run_id is None and ops[0].label == "create run":
            self.manual_run_id = self._env.ops().trigger(self._job_id, "person")
        self._env.store.write(ops)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env.store, name)


def test_a_claim_from_a_stale_read_is_linked_behind_the_manual_run_that_overtook_it(env: Env) -> None:
    env.registry.add("t", lambda _ctx: None)
    seed_active(env, job("c", "rate(1 hour)", target="t", overlap=OverlapPolicy.SKIP), T0)
    env.clock.set(T0 - 30_000)
    store = ManualRunBeforeTheClaim(env, "c")
    Trigger(store, env.queue, env.telemetry, env.clock, env.cfg, parallel_queries=False).tick("t")  # type: ignore[arg-type]
    assert store.manual_run_id is not None
    env.clock.set(T0)  # the claim's messages are delayed to the occurrence
    messages = [parse_run_message(body) for body in env.receive_all()]
    manual = next(m for m in messages if m.run_id == store.manual_run_id)
    claimed = [m for m in messages if m.run_id != store.manual_run_id]
    # The claim's run was created linked to the chain's old end; the claim links it behind the
    # manual run and sends it again under a new token.
    assert max(m.version for m in claimed) == 2
    assert env.run(claimed[0].run_id)["after_run_id"] == manual.run_id
    worker = env.worker()
    started = worker.begin(manual, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    outcomes = {m.version: worker.process(m, env.clock.now_ms() + DEADLINE) for m in claimed}
    assert outcomes.get(1, Outcome.DUPLICATE) is Outcome.DUPLICATE  # the old link's message is stale
    assert outcomes[2] is Outcome.SKIPPED  # the manual run still runs: no overlap
    assert env.run(claimed[0].run_id)["blocked_by"] == manual.run_id


def test_a_manual_run_waits_for_the_scheduled_run_before_it(env: Env) -> None:
    env.registry.add("t", lambda _ctx: None)
    seed_active(env, job("m", "rate(1 hour)", target="t", overlap=OverlapPolicy.SKIP), T0)
    env.clock.set(T0)
    env.trigger().tick("t")
    (scheduled,) = (parse_run_message(body) for body in env.receive_all())
    worker = env.worker()
    started = worker.begin(scheduled, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    manual_id = env.ops().trigger("m", "person")
    (manual,) = (RunMessage.model_validate(body) for body in env.receive_all())
    assert manual.run_id == manual_id and manual.after_run_id == scheduled.run_id
    assert worker.process(manual, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    assert env.state("m")["latest_run_id"] == manual_id  # the next occurrence waits for it


class ThrottledRelink(ManualRunBeforeTheClaim):
    """As above, and the claim's relink is throttled once (after the SDK's own retries)."""

    throttled = False

    def write(self, ops: list[WriteOp]) -> None:
        if not self.throttled and any(op.label == "relink run" for op in ops):
            self.throttled = True
            raise Throttled("relink throttled")
        super().write(ops)


def test_a_claim_whose_relink_is_throttled_sends_nothing_on_the_stale_link(env: Env) -> None:
    """The relink and the advance are one write: throttled, neither lands, the run is not sent,
    and the next tick relinks it and sends it. Sent on its old link it would start beside the
    manual run."""
    env.registry.add("t", lambda _ctx: None)
    seed_active(env, job("c", "rate(1 hour)", target="t", overlap=OverlapPolicy.SKIP), T0)
    env.clock.set(T0 - 30_000)
    store = ThrottledRelink(env, "c")
    result = Trigger(store, env.queue, env.telemetry, env.clock, env.cfg, parallel_queries=False).tick("t")  # type: ignore[arg-type]
    assert store.throttled and result.throttled == 1
    env.clock.set(T0)
    (manual,) = (parse_run_message(body) for body in env.receive_all())  # the claim's run stays
    assert manual.run_id == store.manual_run_id
    worker = env.worker()
    assert isinstance(worker.begin(manual, env.clock.now_ms() + DEADLINE), Started)
    env.trigger().tick("next")
    (claimed,) = (parse_run_message(body) for body in env.receive_all())
    assert claimed.after_run_id == manual.run_id
    assert worker.process(claimed, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
