"""Late stream records on a successor stack (issue 37, HC4): chaos with ``stream_late`` (a record
late, not lost, arriving after the reconcile pass applied its change), more pauses, deletes and
malformed items, with the services' successor paths. Seed 1 found a re-put's late record, after
a pause and a resume the pass applied, recording the pause's occurrences (``run_not_due``):
a record of a write made before the registration the pass's change came after now dates nothing
(core/transitions/register.py ``written_before_the_change``)."""

from __future__ import annotations

import jobsched.core.transitions.register as register
import pytest
from jobsched_tools.sim import ChaosConfig, FaultRates, run_chaos

FAULTS = FaultRates(stream_late=0.5, operator_pause=0.4, operator_delete=0.2, operator_malformed=0.2)


def late_records_world() -> ChaosConfig:
    return ChaosConfig(seed=1, jobs=15, hours=1, faults=FAULTS, successor=True)


@pytest.mark.timeout(300)
def test_late_records_on_a_successor_stack_hold_every_invariant(monkeypatch: pytest.MonkeyPatch) -> None:
    report = run_chaos(late_records_world())
    assert report.faults_injected.get("stream_late", 0) > 10
    assert report.invariant_violations == [], report.invariant_violations[:5]
    # Without the check, the re-put's record dates the resume and records the pause's instants.
    monkeypatch.setattr(register, "written_before_the_change", lambda *_args: False)
    kinds = {v.split(" ", 1)[0] for v in run_chaos(late_records_world()).invariant_violations}
    assert "run_not_due" in kinds
