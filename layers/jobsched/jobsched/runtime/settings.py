"""Deploy-time configuration: the template's parameters arrive as environment variables and are
parsed and validated here, once, on the first invocation. A bad value fails it with a message
naming the variable, instead of quietly weakening a guarantee.

One source for every scheduler tunable: ``SchedulerConfig`` (core/config.py) holds each one's
default, bounds and meaning. The settings below take their scheduler fields from it (one
environment variable per field, upper-cased), and tests/template/test_template.py checks that
every template parameter and the docs/deploy.md table agree with it.

A plain pydantic model read from ``os.environ`` (``Settings.from_env``), not pydantic-settings:
that package's import (its sources, dotenv, asyncio) cost about 50 ms of every cold start for one
dictionary lookup per field (issue 17).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from jobsched.core.claim_shape import DeployedShape
from jobsched.core.config import SchedulerConfig

# Read as plain values here and validated with their bounds when the SchedulerConfig is built,
# so a bad value's error names the field and its limits once, in one place.
_SCHEDULER_FIELDS: dict[str, Any] = {
    name: (field.annotation, field.default) for name, field in SchedulerConfig.model_fields.items()
}


class _RuntimeSettings(BaseModel):
    """What only the Lambda runtime needs: resource names, the worker's threads, allow-lists.

    Never validated itself, nor is ``_WithScheduler``: only ``Settings`` is. So neither builds
    its validator (``defer_build``); ``Settings`` builds its own at import, as before, instead of
    three in a row (a few ms of every function's cold start)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    jobs_table: str = Field(min_length=3)
    state_table: str = Field(min_length=3)
    runs_table: str = Field(min_length=3)
    work_queue_url: str = Field(min_length=1)
    # Which claim indexes the tables have (template.yaml's ClaimShape; core/claim_shape.py). Absent
    # in the environment: legacy, the shape every stack had before the parameter existed.
    claim_shape: DeployedShape = DeployedShape.LEGACY

    # The trigger's own `live` alias, which a fan-out tick invokes once per other shard group
    # (TriggerGroups > 1); blank in the other functions, which never invoke it.
    trigger_function_arn: str = ""
    # The miss detector's `live` alias, which the registrar wakes when it makes a lease outside a
    # tick (services/waking.py); blank: nothing is woken.
    detector_function_arn: str = ""

    # Records of one SQS batch processed at once by a worker invocation (1: one after another).
    worker_record_concurrency: int = Field(10, ge=1, le=100)

    # Comma-separated in the environment (the template joins its list parameters with ","); empty
    # entries dropped, so an unset list parameter ("") allows nothing.
    allowed_queue_arns: list[str] = Field(default_factory=list)
    allowed_event_bus_arns: list[str] = Field(default_factory=list)
    allowed_function_arns: list[str] = Field(default_factory=list)
    # Tables handlers may stage effects on (ctx.stage_put/stage_update): the worker checks each
    # staged effect against it (targets/registry.py EffectTables). Empty allows none.
    staged_effect_table_arns: list[str] = Field(default_factory=list)
    # Step Functions state machines (sfn_start_execution), ECS task definitions (ecs_run_task) and
    # the IAM roles an ecs_run_task may pass to ECS: IAM wildcards (* and ?) allowed, as in the grant.
    allowed_state_machine_arns: list[str] = Field(default_factory=list)
    allowed_task_definition_arns: list[str] = Field(default_factory=list)
    allowed_task_role_arns: list[str] = Field(default_factory=list)
    # Issue 38: the IAM actions aws_sdk may call (``ec2:StopInstances``: no wildcards, each is the
    # worker's grant), the SNS topics of sns_publish, the Kinesis streams of kinesis_put_record, and
    # the SQS queues jobs may name as their dead-letter queue (``dead_letter_queue_arn``).
    allowed_sdk_actions: list[str] = Field(default_factory=list)
    allowed_topic_arns: list[str] = Field(default_factory=list)
    allowed_stream_arns: list[str] = Field(default_factory=list)
    allowed_dead_letter_queue_arns: list[str] = Field(default_factory=list)
    # The outcome publisher's EventBridge bus (services/outcomes.py); only that function has one.
    outcome_event_bus_name: str = ""

    @field_validator(
        "allowed_queue_arns",
        "allowed_event_bus_arns",
        "allowed_function_arns",
        "staged_effect_table_arns",
        "allowed_state_machine_arns",
        "allowed_task_definition_arns",
        "allowed_task_role_arns",
        "allowed_sdk_actions",
        "allowed_topic_arns",
        "allowed_stream_arns",
        "allowed_dead_letter_queue_arns",
        mode="before",
    )
    @classmethod
    def _split(cls, value: object) -> list[str]:
        if isinstance(value, list | tuple):
            return [str(v) for v in value if str(v)]
        return [part.strip() for part in str(value or "").split(",") if part.strip()]

    @field_validator("allowed_sdk_actions")
    @classmethod
    def _no_wildcard_actions(cls, value: list[str]) -> list[str]:
        """Each entry is one IAM action, ``service:Operation``: the grant is exactly the list, so a
        wildcard would grant what nobody listed."""
        from jobsched.targets.universal import SDK_ACTION_ENTRY

        wrong = [entry for entry in value if not SDK_ACTION_ENTRY.match(entry)]
        if wrong:
            raise ValueError(
                "AllowedSdkActions entries must be IAM actions without wildcards "
                f"(ec2:StopInstances), got {wrong}"
            )
        return value


_WithScheduler: type[_RuntimeSettings] = create_model(
    "_WithScheduler", __base__=_RuntimeSettings, **_SCHEDULER_FIELDS
)


class Settings(_WithScheduler):
    model_config = ConfigDict(defer_build=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings from environment variables (``os.environ`` by default): one per field,
        its name upper-cased (``JOBS_TABLE``); any case is accepted, other variables ignored."""
        env = os.environ if environ is None else environ
        by_field = {name.lower(): value for name, value in env.items() if name.lower() in cls.model_fields}
        return cls.model_validate(by_field)

    def scheduler_config(self) -> SchedulerConfig:
        return SchedulerConfig(**{name: getattr(self, name) for name in SchedulerConfig.model_fields})
