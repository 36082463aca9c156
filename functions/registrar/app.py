"""Registrar: jobs table stream -> validate definitions, make them schedulable or mark invalid.

Each record is handled on its own (partial batch responses), so one bad record never blocks the
others; an invalid definition is marked invalid (not retried), so only infrastructure errors
retry, and the event source's bisect-on-error and failure destination bound those. A record that
fails is logged (``batch.record_failed``, with its sequence number and the reason) and counted
(``FailedRecords``; ``PoisonRecords`` for one that is not a change to a job item, such as AWS's
sample event), and the invocation still succeeds for the rest of the batch.
"""

from jobsched.runtime.coldstart import init_imports

with init_imports():  # the collector paused for the cold start's imports (runtime/coldstart.py)
    from typing import Any

    # First, before anything imports pydantic: Powertools' batch module builds its parser's pydantic
    # models (about 100 ms, unused here) only when pydantic is already imported at that moment.
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse

    # isort: split
    import job_handlers  # noqa: F401  # this deployment's handlers: targets are checked against them
    from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from jobsched.core.job import plain_values
    from jobsched.runtime.records import ForeignRecord, report_failed_record
    from jobsched.runtime.wiring import app, logger, metrics
    from jobsched.services.registrar import Registrar  # noqa: F401  # imported at init; wiring imports it lazily

processor = BatchProcessor(event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)


def job_change(record: DynamoDBRecord) -> tuple[str, str, dict[str, Any] | None]:
    """(event name, job id, new image) of a jobs-table stream record, or ForeignRecord."""
    change = record.dynamodb
    if change is None or record.event_name is None:
        raise ForeignRecord("not a DynamoDB stream record (no dynamodb change or eventName)")
    keys = plain_values(change.keys or {})
    job_id = keys.get("job_id")
    if not isinstance(job_id, str):
        raise ForeignRecord(f"not a jobs-table change: its keys are {sorted(keys)}, not job_id")
    image = plain_values(change.new_image) if change.new_image else None
    return record.event_name.name, job_id, image


def changed_at(record: DynamoDBRecord) -> int | None:
    """When the change was made, in ms: the record's ``ApproximateCreationDateTime`` (Unix
    seconds, rounded down to the second by DynamoDB Streams), or None when it has none."""
    seconds = record.dynamodb.approximate_creation_date_time if record.dynamodb else None
    return None if seconds is None else int(seconds) * 1000


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    registrar = app().registrar()

    def record_handler(record: DynamoDBRecord) -> str:
        job_id: str | None = None
        try:
            event_name, job_id, image = job_change(record)
            return registrar.on_stream_record(event_name, job_id, image, changed_at(record)).value
        except Exception as exc:
            identifier = (record.dynamodb.sequence_number if record.dynamodb else None) or record.event_id
            # The job id too: the failure destination's message names only the shard and the
            # sequence numbers (docs/operations.md, "Registrar failures not empty").
            report_failed_record(logger, app().telemetry, str(identifier), exc, job_id=job_id)
            raise

    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
