"""The claim indexes of one deployed shape on tables that exist (issue 37; core/claim_shape.py
``DeployedShape``; ports.DEPLOYED_INDEXES): what a deploy of template.yaml with ``ClaimShape`` set
does to a stack's tables, for the local stack and the tests on moto.

``deploy_claim_indexes`` creates each index the shape has and its tables lack, and deletes each
one they have and the shape lacks, one UpdateTable a change: "You can create or delete only one
global secondary index per UpdateTable operation"
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTable.html), the limit
that makes the migration two deploys (docs/proposals/successor-claim-build.md §5). So a legacy
stack redeployed ``migrating`` gains ``due`` (deploy 1), and a migrating one redeployed
``successor`` loses ``next-run`` and ``lease`` (deploy 2). A new index comes with its definition
in ports (``index_definition``); on a provisioned table it takes the table's throughput, as the
template's indexes do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobsched.core.claim_shape import DeployedShape
from jobsched.ports import DEPLOYED_INDEXES, INDEX_KEYS, INDEX_TABLE, index_definition

# Every claim index the shapes choose among (all three are global secondary indexes).
CLAIM_INDEXES = frozenset().union(*DEPLOYED_INDEXES.values())


def template_shape(template: Mapping[str, Any]) -> DeployedShape:
    """The shape a stack deployed from ``template`` with its defaults has: its ``ClaimShape``
    parameter's default, or ``legacy`` for a template without the parameter (the shape every
    stack had before it existed)."""
    parameter = (template.get("Parameters") or {}).get("ClaimShape") or {}
    return DeployedShape(str(parameter.get("Default", DeployedShape.LEGACY.value)))


def deploy_claim_indexes(client: Any, tables: Mapping[str, str], shape: DeployedShape | str) -> list[str]:
    """Bring the tables' claim indexes to ``shape``'s (module docstring). ``tables``: the table
    name of each logical table (``{"state": ..., "runs": ...}``). Returns the changes made, in
    order (``+due on <runs table>``, ``-next-run on <state table>``)."""
    wanted = DEPLOYED_INDEXES[DeployedShape(shape).value]
    changes: list[str] = []
    for logical in sorted({INDEX_TABLE[name] for name in CLAIM_INDEXES}):
        name = tables[logical]
        table = client.describe_table(TableName=name)["Table"]
        present = {index["IndexName"] for index in table.get("GlobalSecondaryIndexes") or []}
        ours = {index for index in CLAIM_INDEXES if INDEX_TABLE[index] == logical}
        for index in sorted((ours & wanted) - present):
            definition = index_definition(index)
            throughput = table.get("ProvisionedThroughput") or {}
            if table.get("BillingModeSummary", {}).get("BillingMode") != "PAY_PER_REQUEST" and throughput.get(
                "WriteCapacityUnits"
            ):
                definition["ProvisionedThroughput"] = {
                    "ReadCapacityUnits": int(throughput["ReadCapacityUnits"]),
                    "WriteCapacityUnits": int(throughput["WriteCapacityUnits"]),
                }
            partition, sort = INDEX_KEYS[index]
            client.update_table(
                TableName=name,
                AttributeDefinitions=[
                    {"AttributeName": partition, "AttributeType": "N"},
                    {"AttributeName": sort, "AttributeType": "N"},
                ],
                GlobalSecondaryIndexUpdates=[{"Create": definition}],
            )
            changes.append(f"+{index} on {name}")
        for index in sorted((ours - wanted) & present):
            delete = {"Delete": {"IndexName": index}}
            client.update_table(TableName=name, GlobalSecondaryIndexUpdates=[delete])
            changes.append(f"-{index} on {name}")
    return changes
