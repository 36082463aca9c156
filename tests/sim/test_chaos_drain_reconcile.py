"""The chaos drain gives the reconcile pass its promised time for a person's write made during the
drain (sim/world.py ``_registrations_pending``; docs/promises.md row 25: "the miss detector's
reconcile pass applies the change the record carried within a pass and two minutes").

Seed 12 of the heavy operator world with retimes and re-puts (stream_late 0.5, pause 0.4, the rest
0.2), on a successor stack, reported ``registration_not_converged`` for job-0007-rate1. A person
paused it at 00:55:10 (record late), the registrar's report write queued behind that late record,
so the operator's resume at 01:09:10, past the window, came late too (due 01:17:50). The reconcile
pass first saw the difference at 01:09:31 and would apply it once it lasted a minute, but the drain
ended at 01:10:00, 49 s after the write: the world ended before the pass's turn, not the product.
"""

from __future__ import annotations

from typing import Any

import jobsched.services.reconciler as reconciler
import pytest
from jobsched.core.state import Registration, differences
from jobsched_tools.sim import ChaosConfig
from jobsched_tools.sim.scenario import HEAVY_OPERATOR_EDITS
from jobsched_tools.sim.world import CONVERGE_WITHIN_MS, World

RESUMED_IN_THE_DRAIN = ChaosConfig(
    seed=12,
    jobs=15,
    hours=1,
    successor=True,
    faults=HEAVY_OPERATOR_EDITS,
)
JOB = "job-0007-rate1"


@pytest.mark.timeout(300)
def test_a_write_in_the_drain_is_reconciled_before_the_world_ends() -> None:
    world = World(RESUMED_IN_THE_DRAIN)
    assert world.run().invariant_violations == []
    last_write = world.item_history[JOB][-1][0]
    assert world.window_end < last_write < world.end  # the resume came during the drain
    assert world.end - last_write >= CONVERGE_WITHIN_MS  # and the pass had its time


@pytest.mark.timeout(300)
def test_a_change_that_never_reaches_the_state_is_still_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant: past the window, neither the reconcile pass (its comparison) nor the registrar
    (its stream records) applies job-0007's changes (before it the world is the same). The drain
    waits for a recent write only, then ends, and the resume that never reached the state is
    reported."""
    world = World(RESUMED_IN_THE_DRAIN)

    def past_the_window(job_id: object) -> bool:
        return job_id == JOB and world.clock.now_ms() >= world.window_end

    def blind(job: Any, state: Any, shard_count: int) -> list[str]:
        return [] if past_the_window(job.get("job_id")) else differences(job, state, shard_count)

    real = world.registrar.on_stream_record

    def deaf(event_name: str, job_id: str, *args: Any) -> Registration:
        return Registration.UNCHANGED if past_the_window(job_id) else real(event_name, job_id, *args)

    monkeypatch.setattr(reconciler, "differences", blind)
    monkeypatch.setattr(world.registrar, "on_stream_record", deaf)
    violations = world.run().invariant_violations
    assert any(v.startswith(f"registration_not_converged {JOB}:") for v in violations), violations
    assert world.end <= world.item_history[JOB][-1][0] + CONVERGE_WITHIN_MS + 5 * 60_000
