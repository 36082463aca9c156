"""The simulation's ``--store moto``: DynamoStore on in-process moto, tables from the template."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from jobsched.adapters.dynamodb_store import DynamoStore

from jobsched_tools.emulator.credentials import DUMMY_AWS_ENV
from jobsched_tools.sim.faults import EFFECTS


@contextmanager
def moto_store(extra_indexes: tuple[str, ...] = ()) -> Iterator[DynamoStore]:
    import boto3
    from moto import mock_aws

    from jobsched_tools.emulator.provision import provision

    for name, value in DUMMY_AWS_ENV.items():
        os.environ.setdefault(name, value)
    with mock_aws():
        region = os.environ["AWS_DEFAULT_REGION"]
        dynamodb = boto3.client("dynamodb", region_name=region)
        sqs = boto3.client("sqs", region_name=region)
        resources = provision(
            dynamodb, sqs, prefix="chaos", parameters={"ClaimShape": "legacy"}, extra_indexes=extra_indexes
        )
        dynamodb.create_table(
            TableName=EFFECTS,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield DynamoStore(
            dynamodb,
            resources.jobs_table,
            resources.state_table,
            resources.runs_table,
            table_keys={EFFECTS: ("pk",)},
        )
