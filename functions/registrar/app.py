"""Registrar: jobs table stream -> validate definitions, make them schedulable or mark invalid.

Each record is handled on its own (partial batch responses), so one bad record never blocks the
others; an invalid definition is marked invalid (not retried), so only infrastructure errors
retry, and the event source's bisect-on-error and failure destination bound those.
"""

from typing import Any

import job_handlers  # noqa: F401  # this deployment's handlers: targets are checked against them
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from jobsched.core.job import plain_values
from jobsched.runtime.wiring import app, logger, metrics

processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    registrar = app().registrar()

    def record_handler(record: DynamoDBRecord) -> str:
        change = record.dynamodb
        assert change is not None and record.event_name is not None
        job_id = str(plain_values(change.keys)["job_id"])
        image = plain_values(change.new_image) if change.new_image else None
        return registrar.on_stream_record(record.event_name.name, job_id, image).value

    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
