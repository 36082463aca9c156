"""The GroupInvoker on Lambda: one asynchronous ``Invoke`` (InvocationType ``Event``) per group.

Lambda queues an asynchronous invocation and answers 202 at once, so a fan-out tick spends one
short request per group, not the group's run time. The function's EventInvokeConfig (no retries,
events older than 60 s dropped) applies: a group whose invocation is lost waits one tick.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from jobsched.core.errors import InvokeError

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient

ACCEPTED = 202


class LambdaGroupInvoker:
    def __init__(self, client: LambdaClient, function_arn: str) -> None:
        if not function_arn:
            raise ValueError("TRIGGER_FUNCTION_ARN is needed to invoke trigger groups")
        self.client = client
        self.function_arn = function_arn

    def invoke(self, event: dict[str, Any]) -> None:
        try:
            response = self.client.invoke(
                FunctionName=self.function_arn,
                InvocationType="Event",
                Payload=json.dumps(event).encode(),
            )
        except (BotoCoreError, ClientError) as exc:
            raise InvokeError(f"{self.function_arn}: {exc}") from exc
        status = response.get("StatusCode")
        if status != ACCEPTED:
            raise InvokeError(f"{self.function_arn}: status {status}, expected {ACCEPTED}")


class LambdaDetectorWaker:
    """Wakes the miss detector (services/waking.py): one asynchronous ``Invoke`` of its function
    (its ``live`` alias, or ``qualifier``) with the wake's event. The detector's EventInvokeConfig
    (no retries, events older than 60 s dropped) applies: a lost wake leaves the run to the next
    scheduled invocation."""

    def __init__(self, client: LambdaClient, function: str, qualifier: str | None = None) -> None:
        if not function:
            raise ValueError("the miss detector's function is needed to wake it")
        self.client = client
        self.function = function
        self.qualifier = qualifier

    def __call__(self, event: dict[str, Any]) -> None:
        payload = json.dumps(event).encode()
        try:
            if self.qualifier:
                response = self.client.invoke(
                    FunctionName=self.function,
                    InvocationType="Event",
                    Payload=payload,
                    Qualifier=self.qualifier,
                )
            else:
                response = self.client.invoke(
                    FunctionName=self.function, InvocationType="Event", Payload=payload
                )
        except (BotoCoreError, ClientError) as exc:
            raise InvokeError(f"{self.function}: {exc}") from exc
        status = response.get("StatusCode")
        if status != ACCEPTED:
            raise InvokeError(f"{self.function}: status {status}, expected {ACCEPTED}")
