"""Worker: SQS batch of run messages -> fenced execution, with partial batch responses.

A record is acknowledged only once its outcome is durably recorded (committed, retry scheduled,
recognised as a duplicate). A record that raises is reported as a batch item failure and
redelivered by SQS; one that cannot be parsed at all ends in the dead-letter queue.
"""

from typing import Any

import jobs  # noqa: F401  # registers this deployment's own handlers
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from jobsched.runtime.lambda_context import deadline_ms
from jobsched.runtime.wiring import app, logger, metrics
from jobsched.services.messages import parse_run_message

processor = BatchProcessor(event_type=EventType.SQS)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    worker = app().worker(context.aws_request_id)
    deadline = deadline_ms(context)

    def record_handler(record: SQSRecord) -> str:
        return worker.process(parse_run_message(record.body), deadline).value

    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
