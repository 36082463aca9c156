"""The overlap chain under the races that could break it: a claim made from a stale read of its
job, a manual run joining the chain between a tick's read and its claim, and a manual run that
starts before a claimed occurrence comes due."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from harness import T0, Env, build, job, seed_active
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
    messages = [parse_run_message(m.body) for m in env.queue.sent]
    manual = next(m for m in messages if m.run_id == store.manual_run_id)
    (claimed,) = [m for m in messages if m.run_id != store.manual_run_id]
    # The claim's transaction lost on the state's version; made again from a fresh read, its run
    # is linked behind the manual run from the start: one message, under the first token.
    assert claimed.version == 1 and claimed.after_run_id == manual.run_id
    worker = env.worker()
    started = worker.begin(manual, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    env.clock.set(T0)
    assert worker.process(claimed, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED  # no overlap
    assert env.run(claimed.run_id)["blocked_by"] == manual.run_id


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


def claim_then_manual(env: Env, job_id: str, overlap: OverlapPolicy) -> tuple[RunMessage, RunMessage]:
    """A frequent job: the tick claims its next two occurrences, 30 s and 90 s ahead (the second
    is the chain's end), then a person asks for a manual run, which joins the chain behind them.
    Returns the first occurrence's message and the manual run's."""
    env.registry.add("t", lambda _ctx: None)
    seed_active(env, job(job_id, "rate(1 minute)", target="t", overlap=overlap), T0)
    env.clock.set(T0 - 30_000)
    env.trigger().tick("t")
    scheduled, following = (parse_run_message(m.body) for m in env.queue.sent)  # delayed to their instants
    manual_id = env.ops().trigger(job_id, "person")
    (manual,) = (parse_run_message(m.body) for m in env.queue.sent[2:])
    assert manual.run_id == manual_id and manual.after_run_id == following.run_id
    assert following.after_run_id == scheduled.run_id
    return scheduled, manual


def test_a_claimed_occurrence_not_yet_due_never_blocks_a_manual_run(env: Env) -> None:
    """Issue 25, case 5: under skip, a manual run of a job whose next occurrence is claimed (and
    not yet due) used to be skipped behind it, every time for a job with a period under the
    lookahead. It runs; the occurrence, when it comes due while the manual run still runs, is
    skipped behind it (it sees the manual run through the mark the manual run's start left)."""
    scheduled, manual = claim_then_manual(env, "f", OverlapPolicy.SKIP)
    worker = env.worker()
    started = worker.begin(manual, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    assert env.run(scheduled.run_id)["overtaken_by"] == manual.run_id
    assert env.run(scheduled.run_id)["version"] == scheduled.version  # its message stays good
    env.clock.set(T0)
    assert worker.process(scheduled, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    assert env.run(scheduled.run_id)["blocked_by"] == manual.run_id


def test_an_overtaken_occurrence_runs_once_the_manual_run_ended(env: Env) -> None:
    scheduled, manual = claim_then_manual(env, "g", OverlapPolicy.SKIP)
    worker = env.worker()
    assert worker.process(manual, env.clock.now_ms() + DEADLINE) is Outcome.SUCCEEDED
    env.clock.set(T0)
    assert worker.process(scheduled, env.clock.now_ms() + DEADLINE) is Outcome.SUCCEEDED
    assert "overtaken_by" not in env.run(scheduled.run_id)


def test_an_overtaken_occurrence_waits_behind_the_manual_run_under_buffer_one(env: Env) -> None:
    scheduled, manual = claim_then_manual(env, "b", OverlapPolicy.BUFFER_ONE)
    worker = env.worker()
    started = worker.begin(manual, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)
    env.clock.set(T0)
    assert worker.process(scheduled, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    assert env.run(manual.run_id)["buffered_next"] == scheduled.run_id


def test_a_due_occurrence_still_blocks_a_manual_run(env: Env) -> None:
    """The rule's other half: a claimed run that has come due (its message not yet taken, or it
    is running) holds the job's turn, and the manual run is skipped."""
    scheduled, manual = claim_then_manual(env, "d", OverlapPolicy.SKIP)
    env.clock.set(T0 + 1_000)
    assert env.worker().process(manual, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    # The skip hands a later walk to the occurrence it passed over (not yet due, it will run),
    # whose own walk leads on to the holder: core/policies.py, skipped_for.
    assert env.run(manual.run_id)["blocked_by"] == manual.after_run_id != scheduled.run_id
    assert (
        "still" in env.run(manual.run_id)["reason"] and scheduled.run_id in env.run(manual.run_id)["reason"]
    )


class StartsFirst:
    """The store, with the scheduled run's start landing between the manual run's walk (which
    read it pending and not yet due) and the manual run's own start: the two race."""

    def __init__(self, env: Env, scheduled: RunMessage) -> None:
        self._env = env
        self._scheduled = scheduled
        self.raced = False

    def write(self, ops: list[WriteOp]) -> None:
        if not self.raced and any(op.label == "overtake run" for op in ops):
            self.raced = True
            self._env.clock.set(T0)
            assert self._env.worker("w2").begin(self._scheduled, T0 + DEADLINE) is not None
        self._env.store.write(ops)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env.store, name)


def test_a_manual_run_racing_the_occurrences_start_never_runs_beside_it(env: Env) -> None:
    """The clock decides only which runs: the manual run's mark is conditional on the occurrence
    as its walk read it, so when the occurrence starts in between, the manual run's start fails
    whole, it walks again, finds the occurrence running and is skipped."""
    from jobsched.services.worker import Worker

    scheduled, manual = claim_then_manual(env, "r", OverlapPolicy.SKIP)
    store = StartsFirst(env, scheduled)
    worker = Worker(
        store, env.queue, env.telemetry, env.clock, env.cfg, env.registry, "w1", logging.getLogger
    )  # type: ignore[arg-type]
    assert worker.begin(manual, T0 + DEADLINE) is Outcome.SKIPPED
    assert store.raced and env.run(scheduled.run_id)["status"] == "running"
    assert env.run(manual.run_id)["blocked_by"] == manual.after_run_id  # passed over: see above


def test_a_skip_whose_walk_passed_over_a_run_not_yet_due_hands_the_walk_to_that_run(env: Env) -> None:
    """buffer_one. Run 1 runs; run 2 waits behind it; run 3 is claimed, not yet due. A manual run
    M (after run 3 in the chain) walks past run 3 (not yet due) to run 2, which waits: M is
    skipped. Run 1 ends, run 2 runs, run 3 comes due and waits behind it; run 2 ends, run 3 runs.
    Run 4 (after M) walks through M's skip: it must reach run 3 (running), not run 2 (finished),
    or it starts beside run 3. Chaos seed 2 at 30 jobs x 2 h found it (a late start stood for
    run 3) once issue 29's job mix changed its interleaving."""
    env.registry.add("t", lambda _ctx: None)
    minute = 60_000
    definition = job("b", "rate(1 minute)", target="t", overlap=OverlapPolicy.BUFFER_ONE, timeout_seconds=600)
    seed_active(env, definition, T0)
    worker = env.worker()
    messages: dict[str, RunMessage] = {}

    def pump() -> None:  # every message sent, delayed ones too; the latest per run
        for sent in env.queue.sent:
            message = parse_run_message(sent.body)
            messages[message.run_id] = message

    def at(minutes: int) -> RunMessage:
        return next(m for m in messages.values() if m.scheduled_at == T0 + minutes * minute)

    def claim(when: int) -> None:
        env.clock.set(when)
        env.trigger().tick(f"t{when}")
        pump()

    claim(T0)
    first = worker.begin(at(0), env.clock.now_ms() + DEADLINE)
    assert isinstance(first, Started)
    claim(T0 + minute)
    assert worker.process(at(1), env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    claim(T0 + minute + 30_000)  # runs 3 and 4 (T0 + 2 and 3 min) are claimed, not yet due
    manual_id = env.ops().trigger("b", "person")
    pump()
    manual = messages[manual_id]
    assert manual.after_run_id == at(3).run_id
    assert worker.process(manual, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    assert env.run(manual_id)["blocked_by"] == at(3).run_id  # not run 2, past runs 4 and 3
    assert worker.finish(first, worker.execute(first)) is Outcome.SUCCEEDED  # promotes run 2
    pump()
    second = worker.begin(messages[at(1).run_id], env.clock.now_ms() + DEADLINE)
    assert isinstance(second, Started)
    claim(T0 + 2 * minute)
    assert worker.process(at(2), env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    assert worker.finish(second, worker.execute(second)) is Outcome.SUCCEEDED  # promotes run 3
    pump()
    third = worker.begin(messages[at(2).run_id], env.clock.now_ms() + DEADLINE)
    assert isinstance(third, Started)
    claim(T0 + 4 * minute)
    (behind_manual,) = [m for m in messages.values() if m.after_run_id == manual_id]
    # The run after M comes due while run 3 runs: its walk goes M -> run 4 -> run 3 (running),
    # never M -> run 2 (finished), which would start it beside run 3.
    env.clock.set(max(env.clock.now_ms(), behind_manual.scheduled_at))
    assert worker.process(behind_manual, env.clock.now_ms() + DEADLINE) in (Outcome.BUFFERED, Outcome.SKIPPED)
    assert env.run(at(2).run_id)["status"] == "running"


def test_a_skip_names_the_first_run_its_walk_passed_over_else_the_holder() -> None:
    """Never a run further along the chain, such as the holder's waiting run: a walk that went
    forward could reach the run walking and wait for itself (chaos seed 13 had two backfill runs
    each waiting behind the other when a skip named the holder's waiting run)."""
    from jobsched.core.policies import skipped_for

    holder = {"run_id": "h", "status": "running", "buffered_next": "b"}
    assert skipped_for(holder) == "h"
    assert skipped_for(holder, passed_over="p") == "p"


def test_a_retried_backfill_run_never_waits_behind_the_run_that_waits_for_it(env: Env) -> None:
    """Issue 34, item 12: under buffer_one, a backfill run overtakes the claimed occurrence S
    (not yet due); S comes due while it runs and waits behind it; the backfill's attempt fails
    and it retries. Its new walk found S waiting, and a backfill run is never skipped, so it
    waited behind S: each waited for the other, the detector renewed both leases for ever and
    every later occurrence was skipped behind S. S waits for the backfill run (its overtaker),
    so the retry's walk passes over it: the retry runs, then S."""
    from datetime import timedelta

    from jobsched.core.clock import ms_to_dt
    from jobsched.core.invariants import WAITS_ACYCLIC, check
    from jobsched.core.job import RetryPolicy
    from jobsched.core.run import run_id_for
    from jobsched.core.writes import RUNS, STATE

    attempts: list[str] = []

    def fails_once_when_backfilled(ctx: Any) -> None:
        attempts.append(ctx.run_id)
        if ctx.run_id == run_id_for("d", T0 - 3_600_000) and attempts.count(ctx.run_id) == 1:
            raise RuntimeError("the backfill's first attempt fails")

    env.registry.add("t", fails_once_when_backfilled)
    retry = RetryPolicy(max_attempts=3, backoff_seconds=1, max_backoff_seconds=1, jitter=False)
    seed_active(env, job("d", "rate(1 hour)", target="t", overlap=OverlapPolicy.BUFFER_ONE, retry=retry), T0)
    env.clock.set(T0 - 30_000)
    env.trigger().tick("t")
    (scheduled,) = (parse_run_message(m.body) for m in env.queue.sent)  # S, due at T0
    start = ms_to_dt(T0 - 3_600_000) - timedelta(seconds=1)
    (backfilled,) = env.ops().backfill("d", start, ms_to_dt(T0 - 3_600_000)).created
    (backfill,) = (parse_run_message(m.body) for m in env.queue.sent[1:])
    assert backfill.run_id == backfilled and backfill.after_run_id == scheduled.run_id
    worker = env.worker()
    started = worker.begin(backfill, env.clock.now_ms() + DEADLINE)
    assert isinstance(started, Started)  # it overtook S, not yet due
    assert env.run(scheduled.run_id)["overtaken_by"] == backfill.run_id
    env.clock.set(T0)
    assert worker.process(scheduled, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED  # behind it
    assert worker.finish(started, worker.execute(started)) is Outcome.RETRY_SCHEDULED
    env.clock.set(T0 + 2_000)
    (retried,) = (parse_run_message(m.body) for m in env.queue.sent[2:])
    assert retried.run_id == backfill.run_id and retried.attempt == 2
    outcome = worker.process(retried, env.clock.now_ms() + DEADLINE)
    runs = [r for r in env.store.tables[RUNS].values()]  # type: ignore[attr-defined]
    states = [s for s in env.store.tables[STATE].values()]  # type: ignore[attr-defined]
    assert [str(v) for v in check(states, runs, only=(WAITS_ACYCLIC,))] == []
    assert outcome is Outcome.SUCCEEDED  # not BUFFERED behind the run that waits for it
    # Its commit promoted S, which now runs: nothing waits for ever.
    (promoted,) = (parse_run_message(m.body) for m in env.queue.sent[3:])
    assert promoted.run_id == scheduled.run_id
    assert worker.process(promoted, env.clock.now_ms() + DEADLINE) is Outcome.SUCCEEDED
    assert env.run(scheduled.run_id)["status"] == "succeeded"


@pytest.mark.parametrize("policy", [OverlapPolicy.BUFFER_ONE, OverlapPolicy.CANCEL_OTHER])
def test_a_run_with_a_waiter_behind_it_is_skipped_and_promotes_the_waiter(
    env: Env, policy: OverlapPolicy
) -> None:
    """Walk rule W16: a manual run holds the turn; 00:00 comes due behind it; a second manual
    run, behind 00:00, finds 00:00 pending and waits behind it. 00:00's own wait behind the
    running manual run would make two wait: its write fails, it is skipped, and its end promotes
    the second manual run, which walks again and waits behind the holder: one waits."""
    env.registry.add("t", lambda _ctx: None)
    seed_active(env, job("w", "rate(1 hour)", target="t", overlap=policy), T0)
    env.clock.set(T0 - 60_000)
    first_id = str(env.ops().trigger("w", "first"))
    (first,) = (RunMessage.model_validate(body) for body in env.receive_all())
    worker = env.worker()
    assert isinstance(worker.begin(first, env.clock.now_ms() + DEADLINE), Started)
    env.clock.set(T0)
    env.trigger().tick("t")
    (scheduled,) = (parse_run_message(body) for body in env.receive_all())
    assert scheduled.after_run_id == first_id
    env.clock.set(T0 + 1_000)
    env.ops().trigger("w", "second")
    (second,) = (RunMessage.model_validate(body) for body in env.receive_all())
    assert worker.process(second, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    assert env.run(scheduled.run_id)["buffered_next"] == second.run_id

    assert worker.process(scheduled, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    assert env.run(scheduled.run_id)["blocked_by"] == first_id
    assert "cancel_requested" not in env.run(first_id)
    (promoted,) = (RunMessage.model_validate(body) for body in env.receive_all())
    assert promoted.run_id == second.run_id and env.run(second.run_id)["status"] == "pending"
    assert worker.process(promoted, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    assert env.run(first_id)["buffered_next"] == second.run_id
    waiting = [r for r in (first_id, scheduled.run_id, second.run_id) if env.run(r)["status"] == "buffered"]
    assert waiting == [second.run_id]
