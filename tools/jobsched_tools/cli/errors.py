"""What a person reads when a command cannot do its work because of their setup or the deployment
(no region, no credentials, an endpoint that does not answer, a request AWS refused), not because
of a bug: one sentence on stderr, exit status 2, no traceback (README: "errors are sentences").

``main()`` puts ``readable`` around every command, so a command needs no handler of its own; an
error ``readable`` does not know keeps its traceback (it is a bug to report).
"""

from __future__ import annotations

import os

from jobsched.core.errors import QueueError, StoreError
from jobsched.services.operations import JobNotFound

from jobsched_tools.deployment import TargetError

# The exit status of a command that printed such a sentence.
SETUP_ERROR_EXIT = 2


def readable(exc: BaseException) -> str | None:
    """The one line to print for ``exc`` (without ``error: ``), or None when it is not a setup or
    deployment error."""
    from botocore.exceptions import (
        ClientError,
        ConnectionError,
        HTTPClientError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
        ProfileNotFound,
    )

    if isinstance(exc, JobNotFound):
        return f"no job {exc}"
    if isinstance(exc, NoRegionError):
        return "no AWS region: set AWS_DEFAULT_REGION (or AWS_REGION), or use --local for the local stack"
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return "no AWS credentials: configure them (aws configure, AWS_PROFILE, ...), or use --local"
    if isinstance(exc, ProfileNotFound):
        return f"{exc}: check AWS_PROFILE and ~/.aws/config"
    if isinstance(exc, ConnectionError | HTTPClientError):
        # EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ...: botocore's own
        # sentence names the URL it tried.
        return f"could not reach the deployment ({_first_line(str(exc))}){_endpoint_hint()}"
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        operation = getattr(exc, "operation_name", "the request")
        message = _first_line(str(error.get("Message", exc)))
        return f"AWS refused {operation}: {error.get('Code', 'error')}: {message}"
    if isinstance(exc, StoreError | QueueError):
        return f"the deployment did not answer as expected: {_first_line(str(exc))}"
    if isinstance(exc, TargetError | ValueError | OSError):
        return _first_line(str(exc))
    return None


def _endpoint_hint() -> str:
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        return f": AWS_ENDPOINT_URL is {endpoint}; is that right, and is it running?"
    return ": check the network, the region and the endpoint (AWS_ENDPOINT_URL)"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
