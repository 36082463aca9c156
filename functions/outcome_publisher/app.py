"""Outcome publisher: runs-table stream -> each terminal outcome on the outcome bus, at least once.

The stream mapping's filter passes only records whose new image is terminal; the service
publishes those that ended a run (services/outcomes.py) and names the records whose event the bus
did not take, so Lambda delivers them again until they expire (24 hours). A record that is not a
runs-table change is logged and counted, and passed over: it ends no run, so nothing is lost, and
retrying it would hold the shard's later outcomes for a day.
"""

from jobsched.runtime.coldstart import init_imports

with init_imports():  # the collector paused for the cold start's imports (runtime/coldstart.py)
    from typing import Any

    from aws_lambda_powertools.utilities.typing import LambdaContext
    from jobsched.runtime.records import ForeignRecord, report_failed_record, stream_image
    from jobsched.runtime.wiring import app, logger, metrics
    from jobsched.services.outcomes import RunChange


def run_change(record: dict[str, Any]) -> RunChange:
    change = record.get("dynamodb") or {}
    keys = stream_image(change.get("Keys")) or {}
    sequence_number = change.get("SequenceNumber")
    if not sequence_number or "run_id" not in keys:
        raise ForeignRecord("not a runs-table stream record (no dynamodb change with a run_id key)")
    seconds = change.get("ApproximateCreationDateTime")
    return RunChange(
        identifier=str(sequence_number),
        old=stream_image(change.get("OldImage")),
        new=stream_image(change.get("NewImage")),
        changed_at=None if seconds is None else int(seconds) * 1000,
    )


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], _context: LambdaContext) -> dict[str, Any]:
    changes = []
    for record in event.get("Records") or []:
        try:
            changes.append(run_change(record))
        except ForeignRecord as exc:
            report_failed_record(logger, app().telemetry, str(record.get("eventID")), exc)
    retry = app().outcome_publisher().publish(changes)
    return {"batchItemFailures": [{"itemIdentifier": identifier} for identifier in retry]}
