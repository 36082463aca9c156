"""Create jobsched's tables and queues on a local endpoint (moto, DynamoDB Local) from ``template.yaml``.

The SAM template is the one source of truth for the schema: this module reads the tables' key
schemas, indexes, stream and TTL settings and the queues' attributes from it rather than keeping a
second copy. It is for the local stack and the tests; the Lambda functions never call it (the
deployed stack is created by CloudFormation), so PyYAML, a dev dependency, is imported lazily.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from jobsched.ports import BASE_QUERIES, INDEX_TABLE, index_definition

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

TEMPLATE_NAME = "template.yaml"

# The template's functions, by logical id (the outcome publisher only with an outcome bus): what
# the template and IAM tests hold the template to.
FUNCTION_IDS = (
    "TriggerFunction",
    "WorkerFunction",
    "MissDetectorFunction",
    "RegistrarFunction",
    "OutcomePublisherFunction",
)
JOBS_TABLE_ID = "JobsTable"
STATE_TABLE_ID = "StateTable"
RUNS_TABLE_ID = "RunsTable"
WORK_QUEUE_ID = "WorkQueue"
DEAD_LETTER_QUEUE_ID = "WorkDeadLetterQueue"
REGISTRAR_FAILURE_QUEUE_ID = "RegistrarFailureQueue"

# Physical names are the caller's prefix plus these suffixes.
_TABLE_SUFFIXES = {JOBS_TABLE_ID: "jobs", STATE_TABLE_ID: "state", RUNS_TABLE_ID: "runs"}
# Dead-letter queues first: the work queue's redrive policy needs the DLQ's ARN.
_QUEUE_SUFFIXES = {
    DEAD_LETTER_QUEUE_ID: "dlq",
    REGISTRAR_FAILURE_QUEUE_ID: "registrar-failures",
    WORK_QUEUE_ID: "work",
}
# CloudFormation AWS::SQS::Queue properties that are not queue attributes.
_QUEUE_NON_ATTRIBUTES = {"QueueName", "Tags", "RedriveAllowPolicy"}


@dataclass(frozen=True)
class Resources:
    """The physical names the local stack's processes are configured with."""

    jobs_table: str
    state_table: str
    runs_table: str
    work_queue_url: str
    dead_letter_queue_url: str
    registrar_failure_queue_url: str
    jobs_stream_arn: str | None
    runs_stream_arn: str | None = None  # the outcome publisher's stream


class TemplateError(ValueError):
    """The template lacks something provisioning needs, or uses an intrinsic it cannot resolve."""


def find_template(start: Path | None = None) -> Path:
    """The repository's ``template.yaml``: the nearest one in ``start`` (default: this file's
    folder) or a parent folder."""
    here = (start or Path(__file__)).resolve()
    for folder in (here, *here.parents):
        candidate = folder / TEMPLATE_NAME
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no {TEMPLATE_NAME} in {here} or any parent folder; pass template_path")


def load_template(path: Path | None = None) -> dict[str, Any]:
    """Parse a CloudFormation/SAM template. Short-form tags become their long form:
    ``!Ref X`` -> ``{"Ref": "X"}``, ``!GetAtt A.B`` -> ``{"Fn::GetAtt": ["A", "B"]}``,
    ``!Condition C`` -> ``{"Condition": "C"}``, any other ``!Name v`` -> ``{"Fn::Name": v}``."""
    import yaml

    class _CfnLoader(yaml.SafeLoader):  # type: ignore[misc]  # yaml is untyped here
        pass

    def construct(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
        value: Any
        if isinstance(node, yaml.ScalarNode):
            value = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        elif isinstance(node, yaml.MappingNode):
            value = loader.construct_mapping(node, deep=True)
        else:  # pragma: no cover - PyYAML has no other node kinds
            raise TemplateError(f"unsupported node for !{tag_suffix}")
        if tag_suffix == "Ref":
            return {"Ref": value}
        if tag_suffix == "Condition":
            return {"Condition": value}
        if tag_suffix == "GetAtt" and isinstance(value, str):
            resource, _, attribute = value.partition(".")
            return {"Fn::GetAtt": [resource, attribute]}
        return {f"Fn::{tag_suffix}": value}

    _CfnLoader.add_multi_constructor("!", construct)
    source = path or find_template()
    with open(source, encoding="utf-8") as handle:
        document = yaml.load(handle, Loader=_CfnLoader)  # a SafeLoader: no arbitrary objects
    if not isinstance(document, dict) or not isinstance(document.get("Resources"), dict):
        raise TemplateError(f"{source} is not a CloudFormation template (no Resources)")
    return document


def table_specs(
    template: Mapping[str, Any], parameters: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """``dynamodb.create_table`` keyword arguments for every table in the template, by logical id
    (the caller adds ``TableName``), under the template's parameter defaults and ``parameters``
    (``{"CapacityMode": "PROVISIONED"}`` gives provisioned tables and indexes;
    ``{"ClaimShape": "legacy"}`` the claim indexes of ``ports.DEPLOYED_INDEXES["legacy"]``, the
    default ``successor`` only ``due``)."""
    resolver = _Resolver(template, parameters or {})
    specs: dict[str, dict[str, Any]] = {}
    for logical_id, resource in _resources_of_type(template, "AWS::DynamoDB::Table").items():
        props = resolver.resolve(resource.get("Properties", {}))
        spec: dict[str, Any] = {
            "KeySchema": props["KeySchema"],
            "AttributeDefinitions": props["AttributeDefinitions"],
            "BillingMode": props.get("BillingMode", "PROVISIONED"),
        }
        for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            if props.get(key):
                spec[key] = [_capacity_as_numbers(index) for index in props[key]]
        if spec["BillingMode"] == "PROVISIONED":
            spec["ProvisionedThroughput"] = _capacity_as_numbers(props)["ProvisionedThroughput"]
        stream = props.get("StreamSpecification")
        if stream:
            spec["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
        specs[logical_id] = spec
    return specs


def with_indexes(specs: Mapping[str, dict[str, Any]], names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``specs`` (``table_specs``) with each index of ``names`` its table lacks added, as
    ``ports.index_definition`` defines it (tests/template holds the template's indexes equal to
    it): ``("due",)`` beside a ``legacy`` stack's indexes gives a ``migrating`` one. An index the
    table has already is left as the template defines it. An index of a provisioned table gets
    the table's throughput, as the template's indexes do."""
    logical = {suffix: logical_id for logical_id, suffix in _TABLE_SUFFIXES.items()}
    out = {logical_id: dict(spec) for logical_id, spec in specs.items()}
    for name in names:
        if name not in INDEX_TABLE or name in BASE_QUERIES:
            raise TemplateError(
                f"{name!r} is not a global secondary index the code defines (ports.INDEX_TABLE)"
            )
        spec = out[logical[INDEX_TABLE[name]]]
        if name in {index["IndexName"] for index in spec.get("GlobalSecondaryIndexes", [])}:
            continue
        definition = index_definition(name)
        if "ProvisionedThroughput" in spec:
            definition["ProvisionedThroughput"] = dict(spec["ProvisionedThroughput"])
        declared = {attr["AttributeName"] for attr in spec["AttributeDefinitions"]}
        keys = [key["AttributeName"] for key in definition["KeySchema"]]
        missing = [key for key in keys if key not in declared]
        if missing:  # due's keys are lease's: the runs table declares them under every ClaimShape
            raise TemplateError(f"index {name!r}: the table declares no type for {missing}")
        spec["GlobalSecondaryIndexes"] = [*spec.get("GlobalSecondaryIndexes", []), definition]
    return out


def _capacity_as_numbers(props: Mapping[str, Any]) -> dict[str, Any]:
    """A table's or index's properties with its provisioned throughput as integers (a parameter's
    value is text)."""
    throughput = props.get("ProvisionedThroughput")
    if throughput is None:
        return dict(props)
    return {**props, "ProvisionedThroughput": {key: int(value) for key, value in throughput.items()}}


def provision(
    dynamodb_client: DynamoDBClient,
    sqs_client: SQSClient,
    prefix: str = "jobsched-local",
    template_path: Path | None = None,
    *,
    parameters: Mapping[str, str] | None = None,
    extra_indexes: Iterable[str] = (),
) -> Resources:
    """Create (or reuse) the three tables, with TTL, and the three queues, named ``<prefix>-<suffix>``.

    Idempotent: existing tables are reused as they are; existing queues get the template's
    attributes again. ``parameters`` overrides template parameter defaults where the template's
    table and queue properties refer to them (e.g. ``{"WorkerTimeoutSeconds": "120"}`` gives the
    work queue a short visibility timeout for a local stack; ``{"ClaimShape": "legacy"}`` gives
    today's claim indexes, ``next-run`` and ``lease``, where the default, ``successor``, gives
    ``due`` alone: ``ports.DEPLOYED_INDEXES``). ``extra_indexes`` names indexes the code defines
    that the tables then get beside the template's (``with_indexes``).
    """
    template = load_template(template_path)
    resolver = _Resolver(template, parameters or {})

    tables: dict[str, str] = {}
    stream_arn: str | None = None
    runs_stream_arn: str | None = None
    specs = with_indexes(table_specs(template, parameters), extra_indexes)
    for logical_id, spec in specs.items():
        if logical_id not in _TABLE_SUFFIXES:
            continue
        name = f"{prefix}-{_TABLE_SUFFIXES[logical_id]}"
        description = _ensure_table(dynamodb_client, name, spec)
        ttl = template["Resources"][logical_id].get("Properties", {}).get("TimeToLiveSpecification")
        if ttl and resolver.resolve(ttl.get("Enabled", False)):
            _ensure_ttl(dynamodb_client, name, str(resolver.resolve(ttl["AttributeName"])))
        if logical_id == JOBS_TABLE_ID:
            stream_arn = description.get("LatestStreamArn")
        if logical_id == RUNS_TABLE_ID:
            runs_stream_arn = description.get("LatestStreamArn")
        tables[logical_id] = name
    for logical_id in _TABLE_SUFFIXES:
        if logical_id not in tables:
            raise TemplateError(f"template has no {logical_id}")

    queue_urls: dict[str, str] = {}
    for logical_id, suffix in _QUEUE_SUFFIXES.items():
        resource = template["Resources"].get(logical_id)
        if resource is None or resource.get("Type") != "AWS::SQS::Queue":
            raise TemplateError(f"template has no queue {logical_id}")
        attributes = {
            key: _attribute_text(resolver.resolve(value))
            for key, value in resource.get("Properties", {}).items()
            if key not in _QUEUE_NON_ATTRIBUTES
        }
        url = _ensure_queue(sqs_client, f"{prefix}-{suffix}", attributes)
        arn = sqs_client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        resolver.attributes[logical_id] = {"Arn": arn, "QueueName": arn.rsplit(":", 1)[-1], "QueueUrl": url}
        queue_urls[logical_id] = url

    return Resources(
        jobs_table=tables[JOBS_TABLE_ID],
        state_table=tables[STATE_TABLE_ID],
        runs_table=tables[RUNS_TABLE_ID],
        work_queue_url=queue_urls[WORK_QUEUE_ID],
        dead_letter_queue_url=queue_urls[DEAD_LETTER_QUEUE_ID],
        registrar_failure_queue_url=queue_urls[REGISTRAR_FAILURE_QUEUE_ID],
        jobs_stream_arn=stream_arn,
        runs_stream_arn=runs_stream_arn,
    )


# ---------------------------------------------------------------------------- helpers


def _resources_of_type(template: Mapping[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource
        for logical_id, resource in template.get("Resources", {}).items()
        if isinstance(resource, dict) and resource.get("Type") == resource_type
    }


# What ``Ref AWS::NoValue`` resolves to: the property that holds it is left out.
_NO_VALUE = object()


class _Resolver:
    """Resolves the few intrinsics the table and queue properties use: ``Ref`` of a parameter,
    ``Fn::FindInMap`` and ``Fn::GetAtt`` of a resource provisioned earlier."""

    def __init__(self, template: Mapping[str, Any], overrides: Mapping[str, str]) -> None:
        self._parameters = template.get("Parameters", {})
        self._mappings = template.get("Mappings", {})
        self._conditions = template.get("Conditions", {})
        self._overrides = overrides
        unknown = set(overrides) - set(self._parameters)
        if unknown:
            raise TemplateError(f"unknown template parameters: {', '.join(sorted(unknown))}")
        self.attributes: dict[str, dict[str, str]] = {}

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):  # an item that resolves to AWS::NoValue is left out
            return [item for item in (self.resolve(item) for item in value) if item is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Ref":
                return self._ref(argument)
            if key == "Fn::FindInMap":
                mapping, top, second = (str(self.resolve(part)) for part in argument)
                try:
                    return self._mappings[mapping][top][second]
                except KeyError as exc:
                    raise TemplateError(f"Fn::FindInMap {mapping}/{top}/{second} not found") from exc
            if key == "Fn::GetAtt":
                resource, attribute = argument
                try:
                    return self.attributes[resource][attribute]
                except KeyError as exc:
                    raise TemplateError(f"Fn::GetAtt {resource}.{attribute} is not provisioned yet") from exc
            if key == "Fn::If":
                condition, when_true, when_false = argument
                return self.resolve(when_true if self.condition(condition) else when_false)
            if key.startswith("Fn::") or key == "Condition":
                raise TemplateError(f"provisioning cannot resolve {key}")
        resolved = {key: self.resolve(item) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not _NO_VALUE}

    def condition(self, name: str) -> bool:
        """A template condition's value under the parameters (Fn::Equals, Fn::Not, Fn::And, Fn::Or
        and Condition references: what the template's conditions are made of)."""
        try:
            return self._truth(self._conditions[name])
        except KeyError as exc:
            raise TemplateError(f"no condition {name}") from exc

    def _truth(self, expression: Any) -> bool:
        ((key, argument),) = expression.items()
        if key == "Condition":
            return self.condition(argument)
        if key == "Fn::Equals":
            left, right = (self.resolve(part) for part in argument)
            return str(left) == str(right)
        if key == "Fn::Not":
            return not self._truth(argument[0])
        if key == "Fn::And":
            return all(self._truth(part) for part in argument)
        if key == "Fn::Or":
            return any(self._truth(part) for part in argument)
        raise TemplateError(f"provisioning cannot evaluate {key} in a condition")

    def _ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in self._overrides:
            return self._overrides[name]
        if name in self._parameters:
            if "Default" not in self._parameters[name]:
                raise TemplateError(f"parameter {name} has no default; pass it in parameters")
            return self._parameters[name]["Default"]
        if name in self.attributes:
            return self.attributes[name]["QueueUrl"]
        raise TemplateError(f"cannot resolve Ref {name}")


def _attribute_text(value: Any) -> str:
    """An SQS attribute value: JSON for policies, lower-case for booleans, text otherwise."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _ensure_table(client: DynamoDBClient, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    try:
        client.create_table(TableName=name, **spec)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceInUseException":
            raise
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    return dict(client.describe_table(TableName=name)["Table"])


def _ensure_ttl(client: DynamoDBClient, name: str, attribute: str) -> None:
    current = client.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
    if (
        current.get("TimeToLiveStatus") in ("ENABLED", "ENABLING")
        and current.get("AttributeName") == attribute
    ):
        return  # DynamoDB rejects enabling TTL twice
    client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": attribute}
    )


def _ensure_queue(client: SQSClient, name: str, attributes: Mapping[str, str]) -> str:
    try:
        url = client.get_queue_url(QueueName=name)["QueueUrl"]
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code not in ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"):
            raise
        return client.create_queue(QueueName=name, Attributes=dict(attributes))["QueueUrl"]  # type: ignore[arg-type]
    if attributes:
        client.set_queue_attributes(QueueUrl=url, Attributes=dict(attributes))  # type: ignore[arg-type]
    return url
