"""Parsing run messages at the worker's boundary."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from jobsched.core.run import RunMessage


class PoisonMessage(ValueError):
    """A message that cannot be a run message. It is never acknowledged, so SQS moves it to the
    dead-letter queue after maxReceiveCount deliveries, where a person can look at it."""


def parse_run_message(body: str | dict[str, Any]) -> RunMessage:
    try:
        if isinstance(body, str):
            return RunMessage.model_validate_json(body)
        return RunMessage.model_validate(body)
    except ValidationError as exc:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
        raise PoisonMessage(f"not a run message: {reasons}") from exc
