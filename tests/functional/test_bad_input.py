"""Inputs at the edge of what people, handlers and messages can send (issue 26, items 4-10):
each is refused at its boundary with a reason, and never fails the work of others."""

from __future__ import annotations

from typing import Any

import pytest
from harness import T0, job
from jobsched.core.run import run_id_for
from jobsched.services.messages import PoisonMessage, parse_run_message


def _body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "v": 1,
        "run_id": run_id_for("j1", T0),
        "job_id": "j1",
        "version": 1,
        "attempt": 1,
        "scheduled_at": T0,
        "definition": job("j1").to_item(),
    }
    return {**body, **overrides}


# --- item 7: a message whose ids are no run ids is poison at parsing -----------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"run_id": "j1-2026-12-01"},  # no "@": no run's id
        {"after_run_id": "no-at-sign"},
        {"run_id": run_id_for("other", T0)},  # another job's run
        {"after_run_id": run_id_for("other", T0)},  # a link out of the job's own chain
    ],
)
def test_a_message_whose_ids_are_not_its_job_s_run_ids_is_poison(overrides: dict[str, Any]) -> None:
    assert parse_run_message(_body()).run_id == run_id_for("j1", T0)
    with pytest.raises(PoisonMessage, match="run_id"):
        parse_run_message(_body(**overrides))
