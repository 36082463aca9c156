"""Issue 38 in the chaos world: jobs with their own dead-letter queue, whose sends fail at a
seeded rate. Every run failed for good on such a job reaches its queue at least once, nothing is
still owed after the drain, and no letter is sent for a run that did not fail (sim/invariants.py,
``dead_letters``)."""

from __future__ import annotations

import pytest
from jobsched.core.writes import RUNS
from jobsched.services.dead_letters import DeadLetters
from jobsched_tools.sim import ChaosConfig, FaultRates
from jobsched_tools.sim.world import World

CONFIG = ChaosConfig(seed=2, jobs=20, hours=1, faults=FaultRates(dead_letter_jobs=0.5))


def test_every_owed_dead_letter_is_sent_through_failed_sends() -> None:
    world = World(CONFIG)
    report = world.run()
    assert report.invariant_violations == []
    assert world.dead_letters.failed > 0  # sends failed, and were paid later
    assert {letter["run_id"] for letter in world.dead_letters.sent}  # letters were sent


def test_without_the_detector_paying_the_debt_a_letter_stays_owed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker sends once, right after its commit; a failed send is paid by the detector's
    lease sweep (level-triggered). Without the sweep's delivery the run reports owed letters."""
    from jobsched.services import detector

    class WorkerOnly(DeadLetters):
        def deliver(self, run: dict[str, object]) -> None:  # noqa: ARG002 - pays nothing
            return None

    monkeypatch.setattr(detector, "DeadLetters", WorkerOnly)
    report = World(CONFIG).run()
    assert any(v.startswith("dead_letter_owed") for v in report.invariant_violations)


def test_a_settled_debt_with_a_check_at_left_is_reported() -> None:
    """The explorer's ``dead_letter_check_at_left`` (a failed send recorded after the other payer's
    success puts the look-again time back: ``dead_letter_retry_op:_letter_owed``), checked after the
    drain by chaos too. The random world rarely races two payers, so the check is shown on the
    state it guards: a run recorded sent, its check_at put back."""
    from jobsched.core.writes import RUNS, Update
    from jobsched_tools.sim.invariants import check

    world = World(CONFIG)
    assert world.run().invariant_violations == []
    settled = next(r for r in world.store.inner.tables[RUNS].values() if r.get("dead_letter") == "sent")
    key = {"job_id": settled["job_id"], "run_id": settled["run_id"]}
    world.store.inner.update(Update(RUNS, key, (), "a stale payer's retry", set={"check_at": 1}))
    assert [v.split(" ", 1)[0] for v in check(world).invariant_violations] == ["dead_letter_check_at_left"]


def test_a_queue_that_refuses_every_send_ends_refused_with_its_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job's dead-letter queue SQS refuses for good (deleted; its key refuses): the debt is tried
    for an hour after the failure, then recorded ``refused`` with the reason, and nothing is owed
    after the drain. Without the hour's end (refusals retried like any failed send) the debts of
    that queue stay owed."""
    from jobsched.services import dead_letters

    config = ChaosConfig(
        seed=2, jobs=20, hours=1, faults=FaultRates(dead_letter_jobs=0.5, dead_letter_queue_refuses=0.5)
    )
    world = World(config)
    report = world.run()
    assert report.invariant_violations == []
    runs = world.store.inner.tables[RUNS].values()
    assert world.dead_letters.refused > 0
    assert [r for r in runs if r.get("dead_letter") == "refused"]  # settled as refused, with a reason
    # A debt of a queue that accepts, recorded refused, is reported (the check can fail).
    from jobsched.core.writes import Update
    from jobsched_tools.sim.invariants import check

    accepted = next(r for r in runs if r.get("dead_letter") == "sent")
    key = {"job_id": accepted["job_id"], "run_id": accepted["run_id"]}
    world.store.inner.update(Update(RUNS, key, (), "a wrong refusal", set={"dead_letter": "refused"}))
    assert "dead_letter_refused_wrongly" in {v.split(" ", 1)[0] for v in check(world).invariant_violations}
    monkeypatch.setattr(dead_letters, "REFUSED_FOR_GOOD_AFTER_MS", 10**12)
    assert "dead_letter_owed" in {v.split(" ", 1)[0] for v in World(config).run().invariant_violations}
