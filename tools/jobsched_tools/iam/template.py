"""The template as IAM sees it, offline: the SAM transform (``transform``, run by
aws-sam-translator in the tools' Python) and a ``Stack`` that resolves the intrinsics (``Ref``,
``Fn::GetAtt``, ``Fn::Sub``, ``Fn::Join``, ``Fn::If``, the conditions) to what CloudFormation
would, for a fake account, region, stack name, parameter values and physical names."""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# aws-sam-translator comes with the SAM CLI, which lives apart in .venv-tools/: it pins its own
# pydantic (~=2.13), while .venv holds exactly the layer's locked one (issue 35 item 16). So the
# transform runs in .venv-tools' Python, fed the document on stdin.
_TRANSLATE = """
import json, sys
import boto3
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

request = json.load(sys.stdin)
# A session naming the region, with dummy credentials: the transform calls nothing.
session = boto3.session.Session(
    region_name=request["region"], aws_access_key_id="x", aws_secret_access_key="x"
)
output = Translator(None, Parser(), boto_session=session).translate(
    request["template"],
    parameter_values=request["parameters"],
    get_managed_policy_map=lambda: request["managed"],
)
json.dump(output, sys.stdout)
"""
TOOLS_PYTHON = Path(__file__).resolve().parents[3] / ".venv-tools" / "bin" / "python"


class TransformError(RuntimeError):
    """The SAM transform refused the template (its message is aws-sam-translator's)."""


def translator_python() -> str:
    """The Python that has aws-sam-translator: $JOBSCHED_TOOLS_PYTHON, else the checkout's
    .venv-tools (``make install``), else this one if it has it."""
    explicit = os.environ.get("JOBSCHED_TOOLS_PYTHON")
    if explicit:
        return explicit
    if TOOLS_PYTHON.exists():
        return str(TOOLS_PYTHON)
    if importlib.util.find_spec("samtranslator") is not None:
        return sys.executable
    raise TransformError(
        "the SAM transform needs aws-sam-translator (it comes with the SAM CLI): run `make install`,"
        " which puts it in .venv-tools/, or set JOBSCHED_TOOLS_PYTHON to a Python that has it"
    )


@functools.lru_cache(maxsize=32)
def _translate(request: str, python: str) -> str:
    done = subprocess.run(
        [python, "-c", _TRANSLATE], input=request, capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode != 0:
        raise TransformError(f"the SAM transform failed ({python}):\n{done.stderr[-3000:]}")
    return done.stdout


def transform(
    template: Mapping[str, Any], parameters: Mapping[str, Any] | None = None, region: str = "us-east-1"
) -> dict[str, Any]:
    """The template after the SAM transform, offline: code locations become a dummy S3 object,
    AWS managed policy names resolve from a fixed table instead of IAM, and the region is given
    (SAM otherwise asks boto3 for one). Run by aws-sam-translator in ``translator_python()``;
    the same request is transformed once per process."""
    document = copy.deepcopy(dict(template))
    for resource in document["Resources"].values():
        for key in ("CodeUri", "ContentUri"):
            if key in resource.get("Properties", {}):
                resource["Properties"][key] = "s3://bucket/key"
    arn = "arn:aws:iam::aws:policy/"
    known = {
        "AWSLambdaBasicExecutionRole": arn + "service-role/AWSLambdaBasicExecutionRole",
        "AWSXrayWriteOnlyAccess": arn + "AWSXrayWriteOnlyAccess",
        "AWSLambdaSQSQueueExecutionRole": arn + "service-role/AWSLambdaSQSQueueExecutionRole",
        "AWSLambdaDynamoDBExecutionRole": arn + "service-role/AWSLambdaDynamoDBExecutionRole",
        "AWSLambdaRole": arn + "service-role/AWSLambdaRole",
        "AWSCodeDeployRoleForLambda": arn + "service-role/AWSCodeDeployRoleForLambda",
    }
    request = {"template": document, "parameters": dict(parameters or {}), "region": region, "managed": known}
    output: dict[str, Any] = json.loads(
        _translate(json.dumps(request, sort_keys=True, default=str), translator_python())
    )
    return output


_NO_VALUE = object()


@dataclass
class Stack:
    """What CloudFormation would resolve: pseudo parameters, parameter values (the template's
    defaults unless given) and each resource's physical id (``Ref``) and attributes (``GetAtt``)."""

    template: Mapping[str, Any]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    resources: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    account: str = "123456789012"
    region: str = "us-east-1"
    partition: str = "aws"
    name: str = "jobsched"
    # The UUID that ends the stack's id (AWS::StackId: arn:...:stack/<name>/<uuid>).
    uuid: str = "1c2fa620-982a-11e3-aff7-50e2416294e0"

    def parameter(self, name: str) -> Any:
        spec = self.template.get("Parameters", {}).get(name)
        if spec is None:
            raise KeyError(f"no parameter {name}")
        value = self.parameters.get(name, spec.get("Default"))
        if value is None:
            raise KeyError(f"parameter {name} has no value and no default")
        if spec.get("Type") == "CommaDelimitedList":
            return value if isinstance(value, list) else [part.strip() for part in str(value).split(",")]
        return str(value)

    def ref(self, name: str) -> Any:
        pseudo = {
            "AWS::AccountId": self.account,
            "AWS::Region": self.region,
            "AWS::Partition": self.partition,
            "AWS::StackName": self.name,
            "AWS::URLSuffix": {"aws-cn": "amazonaws.com.cn"}.get(self.partition, "amazonaws.com"),
            "AWS::StackId": f"arn:{self.partition}:cloudformation:{self.region}:{self.account}:stack/"
            f"{self.name}/{self.uuid}",
        }
        if name in pseudo:
            return pseudo[name]
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in self.template.get("Parameters", {}):
            return self.parameter(name)
        return self.attribute(name, "Ref")

    def attribute(self, logical_id: str, name: str) -> str:
        try:
            return self.resources[logical_id][name]
        except KeyError:
            raise KeyError(f"the stack knows no {name} of {logical_id}") from None

    def condition(self, name: str) -> bool:
        return bool(self.resolve(self.template["Conditions"][name]))

    def resolve(self, node: Any) -> Any:
        """``node`` with every intrinsic function resolved; ``AWS::NoValue`` drops its key or item."""
        if isinstance(node, list):
            return [value for value in (self.resolve(item) for item in node) if value is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, value),) = node.items()
            function = _INTRINSICS.get(key)
            if function is not None:
                return function(self, value)
        resolved = {key: self.resolve(value) for key, value in node.items()}
        return {key: value for key, value in resolved.items() if value is not _NO_VALUE}

    def sub(self, text: str, variables: Mapping[str, Any]) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                logical_id, attribute = name.split(".", 1)
                return self.attribute(logical_id, attribute)
            value = self.ref(name)
            return ",".join(value) if isinstance(value, list) else str(value)

        return re.sub(r"\$\{([^}]+)\}", replace, text)


def _get_att(stack: Stack, value: Any) -> str:
    logical_id, name = value.split(".", 1) if isinstance(value, str) else value
    return stack.attribute(str(logical_id), str(stack.resolve(name)))


def _sub(stack: Stack, value: Any) -> str:
    if isinstance(value, str):
        return stack.sub(value, {})
    text, variables = value
    return stack.sub(text, {k: stack.resolve(v) for k, v in variables.items()})


def _join(stack: Stack, value: Any) -> str:
    separator, items = value
    resolved = stack.resolve(items)
    flat: list[str] = []
    for item in resolved if isinstance(resolved, list) else [resolved]:
        flat.extend(str(part) for part in (item if isinstance(item, list) else [item]))
    return str(separator).join(flat)


def _if(stack: Stack, value: Any) -> Any:
    condition, when_true, when_false = value
    return stack.resolve(when_true if stack.condition(condition) else when_false)


_INTRINSICS: dict[str, Callable[[Stack, Any], Any]] = {
    "Ref": lambda stack, value: stack.ref(value),
    "Fn::GetAtt": _get_att,
    "Fn::Sub": _sub,
    "Fn::Join": _join,
    "Fn::If": _if,
    "Fn::Select": lambda stack, value: stack.resolve(value[1])[int(stack.resolve(value[0]))],
    "Fn::Split": lambda stack, value: str(stack.resolve(value[1])).split(value[0]),
    # CloudFormation compares the two values as strings: a Number parameter's 0 equals "0".
    "Fn::Equals": lambda stack, value: str(stack.resolve(value[0])) == str(stack.resolve(value[1])),
    "Fn::FindInMap": lambda stack, value: stack.template["Mappings"][str(stack.resolve(value[0]))][
        str(stack.resolve(value[1]))
    ][str(stack.resolve(value[2]))],
    "Fn::Not": lambda stack, value: not stack.resolve(value[0]),
    "Fn::And": lambda stack, value: all(stack.resolve(item) for item in value),
    "Fn::Or": lambda stack, value: any(stack.resolve(item) for item in value),
    "Condition": lambda stack, value: stack.condition(value),
}
