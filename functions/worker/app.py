"""Worker: SQS batch of run messages -> fenced execution, with partial batch responses.

The records of a batch run concurrently, each on its own thread of a pool of
``WorkerRecordConcurrency`` threads: one long job must not delay the other occurrences that
arrived in its batch. A record is acknowledged only once its outcome is durably recorded
(committed, retry scheduled, recognised as a duplicate). A record that raises is logged
(``batch.record_failed``, with its message id and the reason), counted (``FailedRecords``, and
``PoisonRecords`` for a body that is not a run message) and reported as a batch item failure, so
SQS redelivers it: in 10 s, doubling per receive up to 300 s (its visibility is shortened with
ChangeMessageVisibility; the queue's own is six worker timeouts), and one that cannot be parsed at
all at once, so it ends in the dead-letter queue within seconds. The invocation
itself succeeds even when every record failed: foreign messages are not an infrastructure failure.
"""

from jobsched.runtime.coldstart import init_imports

with init_imports():  # the collector paused for the cold start's imports (runtime/coldstart.py)
    import os
    from concurrent.futures import ThreadPoolExecutor
    from typing import Any

    import job_handlers  # noqa: F401  # registers this deployment's own handlers (HandlersLayer)
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from jobsched.runtime.batch import (
        PartialItemFailureResponse,
        process_partial_response_in_pool,
        sqs_message_id,
    )
    from jobsched.runtime.lambda_context import deadline_ms
    from jobsched.runtime.records import is_poison, report_failed_record, retry_visibility_seconds
    from jobsched.runtime.wiring import app, logger, metrics
    from jobsched.services.messages import parse_run_message
    from jobsched.services.worker import SANDBOX_MUST_END, Worker  # noqa: F401  # Worker: imported at init

# The records' threads, exactly WorkerRecordConcurrency of them. Not a default pool such as
# asyncio's, min(32, CPUs + 4) threads (6 on a 2-vCPU Lambda), which would silently cap it.
_pool: tuple[int, ThreadPoolExecutor] | None = None


def record_pool(size: int) -> ThreadPoolExecutor:
    """One pool per execution environment, with exactly ``size`` threads."""
    global _pool
    if _pool is None or _pool[0] != size:
        if _pool is not None:
            _pool[1].shutdown(wait=False)
        _pool = (size, ThreadPoolExecutor(max_workers=size, thread_name_prefix="record"))
    return _pool[1]


def retry_soon(record: dict[str, Any], exc: BaseException) -> None:
    """Shorten a failed record's visibility (records.retry_visibility_seconds). Best effort: if
    it fails, SQS redelivers the record after the queue's visibility timeout instead."""
    receive_count = int(record["attributes"]["ApproximateReceiveCount"] or 1)
    seconds = retry_visibility_seconds(receive_count, poison=is_poison(exc))
    try:
        app().queue.retry_after(record["receiptHandle"], seconds)
    except Exception as error:  # the batch item failure is reported either way
        logger.warning(
            "batch.retry_visibility_failed", extra={"message_id": record["messageId"], "reason": str(error)}
        )


def record_failed(record: dict[str, Any], exc: Exception) -> None:
    report_failed_record(logger, app().telemetry, record["messageId"], exc)
    retry_soon(record, exc)


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    worker = app().worker(context.aws_request_id)
    deadline = deadline_ms(context)
    response = process_partial_response_in_pool(
        event,
        record_pool(app().settings.worker_record_concurrency),
        prepare=lambda record: parse_run_message(record["body"]),
        run=lambda message: worker.process(message, deadline),
        record_failed=record_failed,
        identifier=sqs_message_id,
        source="SQS",
    )
    if SANDBOX_MUST_END.is_set():
        # A handler's thread outlived its run (services/worker_handler.py): end the process before
        # Lambda freezes it, so that it never thaws beside a later run. The batch's records come
        # back after their visibility timeout; what was committed is dropped then as a duplicate.
        logger.warning("sandbox.ended", extra={"reason": "a handler ignored its cancellation"})
        metrics.flush_metrics()
        os._exit(1)
    return response
