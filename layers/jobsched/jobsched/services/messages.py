"""Parsing run messages at the worker's boundary."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobsched.core.run import RunMessage


class PoisonMessage(ValueError):
    """A message that cannot be a run message. It is never acknowledged, so SQS moves it to the
    dead-letter queue after maxReceiveCount deliveries, where a person can look at it."""


class _RunMessageModel(BaseModel):
    model_config = ConfigDict(extra="ignore")

    v: int = Field(1, ge=1, le=1)
    run_id: str = Field(min_length=3, max_length=400)
    job_id: str = Field(min_length=1, max_length=128)
    version: int = Field(ge=1)
    attempt: int = Field(ge=1)
    scheduled_at: int = Field(ge=0)
    definition: dict[str, Any]


def parse_run_message(body: str | dict[str, Any]) -> RunMessage:
    try:
        model = (
            _RunMessageModel.model_validate_json(body)
            if isinstance(body, str)
            else _RunMessageModel.model_validate(body)
        )
    except ValidationError as exc:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
        raise PoisonMessage(f"not a run message: {reasons}") from exc
    return RunMessage(
        run_id=model.run_id,
        job_id=model.job_id,
        version=model.version,
        attempt=model.attempt,
        scheduled_at=model.scheduled_at,
        definition=model.definition,
    )
