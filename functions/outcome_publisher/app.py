"""Outcome publisher: runs-table stream -> each terminal outcome on the outcome bus, at least once.

The stream mapping's filter passes only records whose new image is terminal; the service
publishes those that ended a run (services/outcomes.py) and names the records whose event the bus
did not take, so Lambda delivers them again until they expire (24 hours). A record that is not a
runs-table change is logged and counted, and passed over: it ends no run, so nothing is lost.
"""

from typing import Any

from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import (
    DynamoDBRecord,
    DynamoDBStreamEvent,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from jobsched.core.job import plain_values
from jobsched.runtime.records import ForeignRecord, report_failed_record
from jobsched.runtime.wiring import app, logger, metrics
from jobsched.services.outcomes import RunChange


def run_change(record: DynamoDBRecord) -> RunChange:
    change = record.dynamodb
    if change is None or not change.sequence_number or "run_id" not in (change.keys or {}):
        raise ForeignRecord("not a runs-table stream record (no dynamodb change with a run_id key)")
    seconds = change.approximate_creation_date_time
    return RunChange(
        identifier=change.sequence_number,
        old=plain_values(change.old_image) if change.old_image else None,
        new=plain_values(change.new_image) if change.new_image else None,
        changed_at=None if seconds is None else int(seconds) * 1000,
    )


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], _context: LambdaContext) -> dict[str, Any]:
    changes = []
    for record in DynamoDBStreamEvent(event).records:
        try:
            changes.append(run_change(record))
        except ForeignRecord as exc:
            report_failed_record(logger, app().telemetry, str(record.event_id), exc)
    retry = app().outcome_publisher().publish(changes)
    return {"batchItemFailures": [{"itemIdentifier": identifier} for identifier in retry]}
