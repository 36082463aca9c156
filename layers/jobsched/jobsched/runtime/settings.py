"""Deploy-time configuration: the template's parameters arrive as environment variables and are
parsed and validated here, once, at cold start. A bad value fails the function's first invocation
with a message naming the variable, instead of quietly weakening a guarantee."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from jobsched.core.config import SchedulerConfig


def _split(value: object) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value if str(v)]
    return [part.strip() for part in str(value or "").split(",") if part.strip()]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False)

    jobs_table: str = Field(min_length=3)
    state_table: str = Field(min_length=3)
    runs_table: str = Field(min_length=3)
    work_queue_url: str = Field(min_length=1)

    shard_count: int = 8
    lookahead_seconds: int = 90
    lease_seconds: int = 30
    heartbeat_seconds: int = 10
    dispatch_lease_seconds: int = 60
    max_claims_per_tick: int = 50_000
    claim_concurrency: int = 16
    deadline_margin_ms: int = 3000
    detector_max_items: int = 1000
    detector_degrade_backlog: int = 5000
    detector_sweep_seconds: int = 10
    history_retention_days: int = 30
    clock_skew_allowance_ms: int = 2000
    min_rate_seconds: int = 10
    trigger_lookback_seconds: int = 300

    # Records of one SQS batch processed at once by a worker invocation (1: one after another).
    worker_record_concurrency: int = Field(10, ge=1, le=100)

    allowed_queue_arns: Annotated[list[str], NoDecode] = Field(default_factory=list)
    allowed_event_bus_arns: Annotated[list[str], NoDecode] = Field(default_factory=list)
    allowed_function_arns: Annotated[list[str], NoDecode] = Field(default_factory=list)

    def model_post_init(self, context: object) -> None:
        for name in ("allowed_queue_arns", "allowed_event_bus_arns", "allowed_function_arns"):
            object.__setattr__(self, name, _split(getattr(self, name)))

    def scheduler_config(self) -> SchedulerConfig:
        return SchedulerConfig(
            shard_count=self.shard_count,
            lookahead_seconds=self.lookahead_seconds,
            lease_seconds=self.lease_seconds,
            heartbeat_seconds=self.heartbeat_seconds,
            dispatch_lease_seconds=self.dispatch_lease_seconds,
            max_claims_per_tick=self.max_claims_per_tick,
            claim_concurrency=self.claim_concurrency,
            deadline_margin_ms=self.deadline_margin_ms,
            detector_max_items=self.detector_max_items,
            detector_degrade_backlog=self.detector_degrade_backlog,
            detector_sweep_seconds=self.detector_sweep_seconds,
            history_retention_days=self.history_retention_days,
            clock_skew_allowance_ms=self.clock_skew_allowance_ms,
            min_rate_seconds=self.min_rate_seconds,
            trigger_lookback_seconds=self.trigger_lookback_seconds,
        )
