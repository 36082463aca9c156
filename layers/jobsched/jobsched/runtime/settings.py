"""Deploy-time configuration: the template's parameters arrive as environment variables and are
parsed and validated here, once, at cold start. A bad value fails the function's first invocation
with a message naming the variable, instead of quietly weakening a guarantee.

One source for every scheduler tunable: ``SchedulerConfig`` (core/config.py) holds each one's
default, bounds and meaning. The settings below take their scheduler fields from it (one
environment variable per field, upper-cased), and tests/template/test_template.py checks that
every template parameter and the docs/deploy.md table agree with it.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, create_model
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from jobsched.core.config import SchedulerConfig

# Read as plain values here and validated with their bounds when the SchedulerConfig is built,
# so a bad value's error names the field and its limits once, in one place.
_SCHEDULER_FIELDS: dict[str, Any] = {
    name: (field.annotation, field.default) for name, field in SchedulerConfig.model_fields.items()
}


def _split(value: object) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value if str(v)]
    return [part.strip() for part in str(value or "").split(",") if part.strip()]


class _RuntimeSettings(BaseSettings):
    """What only the Lambda runtime needs: resource names, the worker's threads, allow-lists."""

    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False)

    jobs_table: str = Field(min_length=3)
    state_table: str = Field(min_length=3)
    runs_table: str = Field(min_length=3)
    work_queue_url: str = Field(min_length=1)

    # The trigger's own `live` alias, which a fan-out tick invokes once per other shard group
    # (TriggerGroups > 1); blank in the other functions, which never invoke it.
    trigger_function_arn: str = ""

    # Records of one SQS batch processed at once by a worker invocation (1: one after another).
    worker_record_concurrency: int = Field(10, ge=1, le=100)

    allowed_queue_arns: Annotated[list[str], NoDecode] = Field(default_factory=list)
    allowed_event_bus_arns: Annotated[list[str], NoDecode] = Field(default_factory=list)
    allowed_function_arns: Annotated[list[str], NoDecode] = Field(default_factory=list)

    def model_post_init(self, context: object) -> None:
        for name in ("allowed_queue_arns", "allowed_event_bus_arns", "allowed_function_arns"):
            object.__setattr__(self, name, _split(getattr(self, name)))


_WithScheduler: type[_RuntimeSettings] = create_model(
    "_WithScheduler", __base__=_RuntimeSettings, **_SCHEDULER_FIELDS
)


class Settings(_WithScheduler):
    def scheduler_config(self) -> SchedulerConfig:
        return SchedulerConfig(**{name: getattr(self, name) for name in SchedulerConfig.model_fields})
