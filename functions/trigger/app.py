"""Trigger: an EventBridge schedule tick (or one shard group's invocation, sent by the tick when
TriggerGroups > 1) -> claim due occurrences -> SQS."""

from jobsched.runtime.coldstart import init_imports

with init_imports():  # the collector paused for the cold start's imports (runtime/coldstart.py)
    from typing import Any

    from aws_lambda_powertools.utilities.typing import LambdaContext
    from jobsched.runtime.lambda_context import deadline_ms
    from jobsched.runtime.wiring import app, logger, metrics
    from jobsched.services.fanout import TriggerInvocation  # noqa: F401  # imported at init, as below
    from jobsched.services.trigger import Trigger  # noqa: F401  # imported at init; wiring imports it lazily


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app().trigger_invocation().handle(event, context.aws_request_id, deadline_ms(context))
