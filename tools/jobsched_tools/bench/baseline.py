"""The baseline a team would otherwise deploy, measured: EventBridge Scheduler invoking a Lambda
target that makes itself idempotent with Powertools' idempotency utility on a DynamoDB table.

EventBridge Scheduler delivers at least once, so the target deduplicates. What that costs per run
is the scheduler's invocation, the Lambda request, and the idempotency table's writes and reads.
The writes are counted, not assumed: ``measure`` runs Powertools' ``idempotent_function`` (the
version this project locks) over distinct payloads against an in-process moto table, with a
``RequestCounter`` on its client, and reports the DynamoDB requests per invocation (today a
conditional PutItem of the INPROGRESS record and an UpdateItem to COMPLETED:
https://docs.powertools.aws.dev/lambda/python/latest/utilities/idempotency/). Every record is
under 1 KB, so a write request is one write unit and a read, if any, half a read unit.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, cast

from jobsched.adapters.aws import RequestCounter

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

WRITES = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
READS = ("dynamodb:GetItem",)


class _LambdaContext:
    """What the utility reads of a Lambda context: the time left, for its in-progress expiry."""

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def measure(invocations: int = 20) -> dict[str, float]:
    """DynamoDB requests per invocation of a Powertools-idempotent function, fresh payloads."""
    import boto3
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )
    from moto import mock_aws

    from jobsched_tools.emulator.credentials import DUMMY_AWS_ENV

    for key, value in DUMMY_AWS_ENV.items():
        os.environ.setdefault(key, value)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="idempotency",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        counter = RequestCounter().attach(client)
        persistence = DynamoDBPersistenceLayer(table_name="idempotency", boto3_client=client)
        config = IdempotencyConfig()
        config.register_lambda_context(cast("LambdaContext", _LambdaContext()))  # as a handler would

        @idempotent_function(  # type: ignore[untyped-decorator]  # Powertools' decorator is untyped
            data_keyword_argument="event", persistence_store=persistence, config=config
        )
        def target(event: dict[str, Any]) -> dict[str, Any]:
            return {"handled": event["run"]}

        for run in range(invocations):
            target(event={"run": f"r{run}"})
        writes = sum(counter.calls[name] for name in WRITES)
        reads = sum(counter.calls[name] for name in READS)
    return {
        "idempotency_write_units_per_run": writes / invocations,
        "idempotency_read_units_per_run": reads * 0.5 / invocations,
    }


def usd_per_million_runs(
    measured: dict[str, float], prices: dict[str, dict[str, Any]], write_unit_usd: float, read_unit_usd: float
) -> dict[str, float]:
    """The baseline's cost by service per million runs, its table's units at the given prices per
    million units (on-demand, or provisioned at a utilisation: units.unit_prices)."""
    parts = {
        "eventbridge_scheduler": float(prices["eventbridge_scheduler"]["invocation_usd_per_million"]),
        "lambda_requests": float(prices["lambda"]["request_usd_per_million"]),
        "dynamodb_writes": measured["idempotency_write_units_per_run"] * write_unit_usd,
        "dynamodb_reads": measured["idempotency_read_units_per_run"] * read_unit_usd,
    }
    rounded = {name: round(value, 4) for name, value in parts.items()}
    rounded["total"] = round(sum(parts.values()), 4)
    return rounded
