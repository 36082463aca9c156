"""The worker and the chain's walk on the successor claim's claimed run, ``scheduled`` until it
starts (docs/proposals/successor-claim-build.md, build step S2), and the worker's adoption of a
stale message (HC3), on the in-memory store.

Nothing writes a ``scheduled`` run yet: each test lets today's trigger claim its runs and turns
them into what the successor claim leaves (``as_scheduled``: same item, status ``scheduled``),
or writes the items an ad-hoc run's relink leaves (HC3) by hand. Each says which widened
condition it fails without.
"""

from __future__ import annotations

from typing import Any

import pytest
from harness import T0, Env, build, job, seed_active
from jobsched.core.job import OverlapPolicy
from jobsched.core.run import RunMessage, manual_run_id
from jobsched.core.writes import RUNS, Put
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Outcome, Started
from test_overlap_chain import DEADLINE, claim_then_manual


@pytest.fixture
def env() -> Any:
    with build("memory") as env:
        yield env


def as_scheduled(env: Env, run_id: str, **changes: Any) -> dict[str, Any]:
    """The run as the successor claim leaves a claimed run: ``scheduled`` until its start, its
    token and link as its claim (or an ad-hoc run's relink) wrote them."""
    run = {**env.run(run_id), "status": "scheduled", **changes}
    env.store.write([Put(RUNS, run, (), "test: the successor claim's claimed run")])
    return run


def put_run(env: Env, run: dict[str, Any]) -> None:
    env.store.write([Put(RUNS, run, (), "test: a run as the successor claim leaves it")])


def claimed(env: Env, job_id: str, overlap: OverlapPolicy) -> RunMessage:
    """An hourly job's occurrence at T0, claimed at T0 - 30 s and made ``scheduled``: its
    claim's message (version 1, first of its chain)."""
    env.registry.add("t", lambda _ctx: None)
    seed_active(env, job(job_id, "rate(1 hour)", target="t", overlap=overlap), T0)
    env.clock.set(T0 - 30_000)
    env.trigger().tick("t")
    (message,) = (parse_run_message(m.body) for m in env.queue.sent)
    as_scheduled(env, message.run_id)
    env.clock.set(T0)
    return message


# --- the worker and the walk accept ``scheduled`` (§1 start, overtake, skip, buffer; §2 W3, W5) --


def test_a_scheduled_run_starts_and_commits(env: Env) -> None:
    """§1 "start" (``start.status_scheduled``). Fails without it: the start is refused, and the
    message dropped as a duplicate."""
    message = claimed(env, "s", OverlapPolicy.SKIP)
    assert env.worker().process(message, env.clock.now_ms() + DEADLINE) is Outcome.SUCCEEDED
    run = env.run(message.run_id)
    assert run["status"] == "succeeded" and run["version"] == message.version + 2


def test_a_manual_run_overtakes_a_scheduled_occurrence_not_yet_due(env: Env) -> None:
    """W3 and §1 "overtake", then the occurrence's start refused by the mark and skipped (§1
    "skip"). Fails without ``not_yet_due`` taking ``scheduled`` (the manual run is skipped behind
    the occurrence), without ``overtake_op``'s (the start's transaction never lands), without the
    worker's ``_still_ours`` (the occurrence's message is dropped, not skipped) and without the
    skip's own condition (dropped too)."""
    scheduled, manual = claim_then_manual(env, "o", OverlapPolicy.SKIP)
    following = env.run(manual.after_run_id or "")
    for run_id in (scheduled.run_id, following["run_id"]):
        as_scheduled(env, run_id)
    worker = env.worker()
    assert isinstance(worker.begin(manual, env.clock.now_ms() + DEADLINE), Started)
    passed = env.run(scheduled.run_id)
    assert passed["overtaken_by"] == manual.run_id and passed["status"] == "scheduled"
    assert passed["version"] == scheduled.version  # its message stays good
    env.clock.set(T0)
    assert worker.process(scheduled, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    assert env.run(scheduled.run_id)["blocked_by"] == manual.run_id


def test_a_due_scheduled_run_holds_the_turn(env: Env) -> None:
    """W5 (``UNFINISHED`` takes ``scheduled``): a claimed run that came due and has not started
    holds the job's turn, and the manual run is skipped. Fails without it: the manual run starts
    beside the occurrence."""
    scheduled, manual = claim_then_manual(env, "d", OverlapPolicy.SKIP)
    as_scheduled(env, scheduled.run_id)
    as_scheduled(env, manual.after_run_id or "")
    env.clock.set(T0 + 1_000)
    assert env.worker().process(manual, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    skipped = env.run(manual.run_id)
    assert f"{scheduled.run_id} still scheduled" in skipped["reason"]
    # The walk passed over the occurrence after it (not yet due: W3); the skip hands it on there.
    assert skipped["blocked_by"] == manual.after_run_id


def test_a_scheduled_occurrence_waits_behind_the_manual_run_that_overtook_it(env: Env) -> None:
    """§1 "buffer" (the run's own condition): under ``buffer_one`` the occurrence, due while the
    manual run that overtook it runs, waits behind it. Fails without it: dropped."""
    scheduled, manual = claim_then_manual(env, "b", OverlapPolicy.BUFFER_ONE)
    as_scheduled(env, scheduled.run_id)
    as_scheduled(env, manual.after_run_id or "")
    worker = env.worker()
    assert isinstance(worker.begin(manual, env.clock.now_ms() + DEADLINE), Started)
    env.clock.set(T0)
    assert worker.process(scheduled, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    assert env.run(scheduled.run_id)["blocked_by"] == manual.run_id
    assert env.run(manual.run_id)["buffered_next"] == scheduled.run_id


def test_buffer_all_a_manual_run_waits_behind_a_scheduled_occurrence_not_yet_due(env: Env) -> None:
    """W15 (the buffer's holder condition takes ``scheduled``): strict chain order, so the manual
    run waits behind the claimed occurrence before it, which is not due yet, and that one's end
    promotes it. Fails without it: the holder's mark is refused on every try."""
    scheduled, manual = claim_then_manual(env, "a", OverlapPolicy.BUFFER_ALL)
    following = manual.after_run_id or ""
    as_scheduled(env, scheduled.run_id)
    as_scheduled(env, following)
    assert env.worker().process(manual, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    assert env.run(manual.run_id)["blocked_by"] == following
    assert env.run(following)["buffered_next"] == manual.run_id


def test_cancel_other_asks_a_scheduled_holder_to_stop_and_the_detector_ends_it(env: Env) -> None:
    """W16: a manual run behind a due claimed run that has not started waits and asks it to stop;
    the claimed run's start is refused (with adoption on too: its token did not move), and the
    detector ends it as cancelled (``recover_op``'s ``cancel_requested`` branch for
    ``scheduled``) and promotes the manual run. Fails without the holder condition's widening."""
    scheduled, manual = claim_then_manual(env, "c", OverlapPolicy.CANCEL_OTHER)
    as_scheduled(env, scheduled.run_id)
    as_scheduled(env, manual.after_run_id or "")
    env.clock.set(T0 + 1_000)
    worker = env.worker(adopt_scheduled=True)
    assert worker.process(manual, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    holder = env.run(scheduled.run_id)
    assert holder["cancel_requested"] == manual.run_id and holder["buffered_next"] == manual.run_id
    assert worker.process(scheduled, env.clock.now_ms() + DEADLINE) is Outcome.DUPLICATE
    assert env.run(scheduled.run_id)["status"] == "scheduled"  # never started
    env.clock.set(int(holder["lease_expires_at"]) + env.cfg.clock_skew_allowance_ms + 1)
    env.detector().run("d")
    ended = env.run(scheduled.run_id)
    assert ended["status"] == "failed" and ended["last_error"].startswith(f"cancelled: {manual.run_id}")
    assert env.run(manual.run_id)["status"] == "pending"  # promoted: it decides again


@pytest.mark.parametrize("policy", [OverlapPolicy.BUFFER_ONE, OverlapPolicy.CANCEL_OTHER])
def test_a_scheduled_run_with_a_waiter_behind_it_is_skipped(env: Env, policy: OverlapPolicy) -> None:
    """W16 (test_overlap_chain's case, the occurrence ``scheduled``): a manual run holds the turn;
    00:00 comes due behind it; a second manual run waits behind 00:00. 00:00's own wait would make
    two wait: its write fails on its waiter, and it is skipped (the worker's ``_waited_on`` takes
    ``scheduled``). Fails without it: 00:00's message is dropped, and nothing ends it."""
    env.registry.add("t", lambda _ctx: None)
    seed_active(env, job("v", "rate(1 hour)", target="t", overlap=policy), T0)
    env.clock.set(T0 - 60_000)
    first_id = str(env.ops().trigger("v", "first"))
    (first,) = (RunMessage.model_validate(body) for body in env.receive_all())
    worker = env.worker()
    assert isinstance(worker.begin(first, env.clock.now_ms() + DEADLINE), Started)
    env.clock.set(T0)
    env.trigger().tick("t")
    (scheduled,) = (parse_run_message(body) for body in env.receive_all())
    as_scheduled(env, scheduled.run_id)
    env.clock.set(T0 + 1_000)
    env.ops().trigger("v", "second")
    (second,) = (RunMessage.model_validate(body) for body in env.receive_all())
    assert worker.process(second, env.clock.now_ms() + DEADLINE) is Outcome.BUFFERED
    assert env.run(scheduled.run_id)["buffered_next"] == second.run_id
    assert worker.process(scheduled, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    assert env.run(scheduled.run_id)["blocked_by"] == first_id
    (promoted,) = (RunMessage.model_validate(body) for body in env.receive_all())
    assert promoted.run_id == second.run_id  # the skip's end promoted its waiter


# --- worker adoption (HC3), behind ``adopt_scheduled`` --------------------------------------------


def relinked(env: Env, job_id: str, overlap: OverlapPolicy, manual_status: str) -> RunMessage:
    """HC3's outcome: the claim of the occurrence N at T0 landed from an index page read before
    a manual run M relinked the head, so its message names version 1 and N's old link (none),
    while N reads version 2, linked behind M. Returns the claim's (stale) message."""
    stale = claimed(env, job_id, overlap)
    m = manual_run_id(job_id, "person")
    put_run(env, {"job_id": job_id, "run_id": m, "kind": "manual", "status": manual_status, "version": 2})
    as_scheduled(env, stale.run_id, version=2, after_run_id=m)
    assert stale.version == 1 and stale.after_run_id is None
    return stale


@pytest.mark.parametrize("adopt", [False, True])
def test_a_stale_message_of_a_scheduled_run_is_adopted_only_with_the_flag(env: Env, adopt: bool) -> None:
    """Adoption on: the refused start starts again at the run's own token (the start stays
    conditional on it); the newer message (the redispatch's) then finds it started and is
    dropped, so the run starts once. Off (the default): dropped; the redispatch starts it."""
    stale = relinked(env, "h", OverlapPolicy.SKIP, "succeeded")
    worker = env.worker(adopt_scheduled=adopt)
    outcome = worker.process(stale, env.clock.now_ms() + DEADLINE)
    if not adopt:
        assert outcome is Outcome.DUPLICATE
        assert env.run(stale.run_id)["status"] == "scheduled" and not env.telemetry.named("run.adopted")
        return
    assert outcome is Outcome.SUCCEEDED
    run = env.run(stale.run_id)
    assert run["status"] == "succeeded" and run["version"] == 4  # started at 2 (token 3), committed
    (adopted,) = env.telemetry.named("run.adopted")
    assert adopted.fields == {"message_version": 1, "version": 2}
    newer = stale.model_copy(update={"version": 2, "after_run_id": run["after_run_id"]})
    assert worker.process(newer, env.clock.now_ms() + DEADLINE) is Outcome.DUPLICATE


def test_an_adopted_run_walks_from_its_own_link(env: Env) -> None:
    """The adopted start takes the run's ``after_run_id`` too: the manual run it is relinked
    behind still runs, so under ``skip`` it is skipped behind it. With the message's old link
    (none) it would start beside the manual run."""
    stale = relinked(env, "w", OverlapPolicy.SKIP, "running")
    m = manual_run_id("w", "person")
    assert env.worker(adopt_scheduled=True).process(stale, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    run = env.run(stale.run_id)
    assert run["blocked_by"] == m and run["version"] == 3  # skipped at the adopted token


def test_a_stale_skip_of_a_scheduled_run_is_adopted_too(env: Env) -> None:
    """The message's old link leads to a running run, so its walk decides a skip; the skip is
    refused by the token, and the run is adopted and decided again from its own link."""
    stale = relinked(env, "k", OverlapPolicy.SKIP, "skipped")
    m = manual_run_id("k", "person")
    before = manual_run_id("k", "before")
    put_run(env, {"job_id": "k", "run_id": before, "kind": "manual", "status": "running", "version": 2})
    put_run(env, {**env.run(m), "blocked_by": before, "after_run_id": before})
    stale = stale.model_copy(update={"after_run_id": before})
    worker = env.worker(adopt_scheduled=True)
    assert worker.process(stale, env.clock.now_ms() + DEADLINE) is Outcome.SKIPPED
    assert env.run(stale.run_id)["version"] == 3 and env.telemetry.named("run.adopted")


def test_adoption_never_starts_a_pending_run(env: Env) -> None:
    """A ``pending`` run at a newer token may be a retry whose message waits out its backoff:
    adopting it would start the retry early (the model's mutant ``adopt_pending``, caught by
    ``adopt-recovered``). Its stale message is dropped, and the run is left as it is."""
    stale = claimed(env, "p", OverlapPolicy.SKIP)
    retry_at = env.clock.now_ms() + 60_000
    as_scheduled(env, stale.run_id, status="pending", version=3, attempt=2, retry_at=retry_at)
    worker = env.worker(adopt_scheduled=True)
    assert worker.process(stale, env.clock.now_ms() + DEADLINE) is Outcome.DUPLICATE
    run = env.run(stale.run_id)
    assert run["status"] == "pending" and run["version"] == 3 and not env.telemetry.named("run.adopted")
