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

    import job_handlers  # noqa: F401  # this deployment's handlers: targets are checked against them
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from jobsched.runtime.batch import (
        PartialItemFailureResponse,
        process_partial_response,
        stream_sequence_number,
    )
    from jobsched.runtime.records import ForeignRecord, report_failed_record, stream_image
    from jobsched.runtime.wiring import app, logger, metrics
    from jobsched.services.registrar import Registrar  # noqa: F401  # imported at init; wiring imports it lazily

EVENT_NAMES = ("INSERT", "MODIFY", "REMOVE")


def job_change(record: dict[str, Any]) -> tuple[str, str, dict[str, Any] | None]:
    """(event name, job id, new image) of a jobs-table stream record, or ForeignRecord."""
    change = record.get("dynamodb")
    event_name = record.get("eventName")
    if change is not None and event_name is not None and event_name not in EVENT_NAMES:
        raise KeyError(event_name)  # as Powertools' DynamoDBRecord.event_name does
    if change is None or event_name is None:
        raise ForeignRecord("not a DynamoDB stream record (no dynamodb change or eventName)")
    keys = stream_image(change.get("Keys")) or {}
    job_id = keys.get("job_id")
    if not isinstance(job_id, str):
        raise ForeignRecord(f"not a jobs-table change: its keys are {sorted(keys)}, not job_id")
    return event_name, job_id, stream_image(change.get("NewImage"))


def changed_at(record: dict[str, Any]) -> int | None:
    """When the change was made, in ms: the record's ``ApproximateCreationDateTime`` (Unix
    seconds, rounded down to the second by DynamoDB Streams), or None when it has none."""
    seconds = (record.get("dynamodb") or {}).get("ApproximateCreationDateTime")
    return None if seconds is None else int(seconds) * 1000


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], _context: LambdaContext) -> PartialItemFailureResponse:
    registrar = app().registrar()

    def record_handler(record: dict[str, Any]) -> str:
        job_id: str | None = None
        try:
            event_name, job_id, image = job_change(record)
            return registrar.on_stream_record(event_name, job_id, image, changed_at(record)).value
        except Exception as exc:
            identifier = (record.get("dynamodb") or {}).get("SequenceNumber") or record.get("eventID")
            # The job id too: the failure destination's message names only the shard and the
            # sequence numbers (docs/operations.md, "Registrar failures not empty").
            report_failed_record(logger, app().telemetry, str(identifier), exc, job_id=job_id)
            raise

    return process_partial_response(event, record_handler, stream_sequence_number, "DynamoDBStreams")
