"""Trigger: EventBridge schedule tick -> claim due occurrences -> SQS."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from jobsched.runtime.lambda_context import deadline_ms
from jobsched.runtime.wiring import app, logger, metrics
from jobsched.services.trigger import Trigger  # noqa: F401  # imported at init; wiring imports it lazily


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    result = app().trigger().tick(context.aws_request_id, deadline_ms(context))
    return result.summary()
