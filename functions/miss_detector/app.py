"""Miss detector: scheduled -> recover expired leases, catch up overdue occurrences, sweeping
every DETECTOR_SWEEP_SECONDS until the invocation's deadline."""

from jobsched.runtime.coldstart import init_imports

with init_imports():  # the collector paused for the cold start's imports (runtime/coldstart.py)
    from typing import Any

    from aws_lambda_powertools.utilities.typing import LambdaContext
    from jobsched.runtime.clock import sleep_ms
    from jobsched.runtime.lambda_context import deadline_ms
    from jobsched.runtime.wiring import app, logger, metrics
    from jobsched.services.detector import MissDetector  # noqa: F401  # at init; wiring imports it lazily


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    every_ms = app().cfg.detector_sweep_seconds * 1000
    # A wake (services/waking.py) says how long to stay awake; the schedule's event says nothing.
    awake_until = event.get("awake_until_ms") if isinstance(event, dict) else None
    until = awake_until if isinstance(awake_until, int) and not isinstance(awake_until, bool) else 0
    result = app().detector().sweep(context.aws_request_id, deadline_ms(context), every_ms, sleep_ms, until)
    return result.summary()
