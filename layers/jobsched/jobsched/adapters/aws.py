"""boto3 clients configured for jobsched, and a request counter for the benchmarks.

The clients use botocore's ``standard`` retry mode (exponential backoff with jitter, a retry
quota, and retries of throttling and transient errors), short connect/read timeouts so that a
stuck connection is retried inside a Lambda's budget instead of eating it, and TCP keep-alive.
An error that survives the SDK's retries reaches the adapters, which map it to the core's
``Throttled``/``TransientStoreError``/``QueueError``.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import TYPE_CHECKING, Any, Literal, overload

import boto3
import botocore
from boto3.session import Session as Session  # re-exported: the type of new_session()
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

DEFAULT_MAX_ATTEMPTS = 4
DEFAULT_CONNECT_TIMEOUT = 2.0
DEFAULT_READ_TIMEOUT = 5.0
# A fixed User-Agent, built once: botocore otherwise rebuilds and sanitises its user-agent string
# (about 18 components) twice per request, which is ~0.4 ms of a ~3 ms conditional write's client
# CPU (issue 18; bench/cpu.py). It still names the SDK and its versions.
USER_AGENT = f"jobsched Boto3/{boto3.__version__} Botocore/{botocore.__version__}"

# A boto3 Session is not thread-safe (its clients are): clients are made from it one at a time.
_SESSION_LOCK = threading.Lock()


def client_config(
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    adaptive: bool = False,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> Config:
    """botocore configuration for jobsched's clients. ``adaptive`` adds client-side rate limiting
    on top of the standard retries (useful for bulk jobs that would otherwise hammer a throttled
    table); ``max_attempts`` counts the first attempt."""
    return Config(
        retries={"mode": "adaptive" if adaptive else "standard", "max_attempts": max_attempts},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        tcp_keepalive=True,
        # The trigger claims with up to 64 threads sharing one client (boto3 clients are
        # thread-safe); botocore's default pool of 10 would make them queue for connections.
        max_pool_connections=64,
        user_agent=USER_AGENT,
        # Every request is built by the adapters from core types; botocore's client-side check of
        # it again costs CPU on every request and catches nothing the server would not.
        parameter_validation=False,
    )


@overload
def make_client(
    service: Literal["dynamodb"],
    endpoint_url: str | None = ...,
    region: str | None = ...,
    *,
    session: Session | None = ...,
    max_attempts: int = ...,
    adaptive: bool = ...,
    connect_timeout: float = ...,
    read_timeout: float = ...,
) -> DynamoDBClient: ...


@overload
def make_client(
    service: Literal["sqs"],
    endpoint_url: str | None = ...,
    region: str | None = ...,
    *,
    session: Session | None = ...,
    max_attempts: int = ...,
    adaptive: bool = ...,
    connect_timeout: float = ...,
    read_timeout: float = ...,
) -> SQSClient: ...


@overload
def make_client(
    service: str,
    endpoint_url: str | None = ...,
    region: str | None = ...,
    *,
    session: Session | None = ...,
    max_attempts: int = ...,
    adaptive: bool = ...,
    connect_timeout: float = ...,
    read_timeout: float = ...,
) -> Any: ...


def make_client(
    service: str,
    endpoint_url: str | None = None,
    region: str | None = None,
    *,
    session: Session | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    adaptive: bool = False,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> Any:
    """A boto3 client for ``service`` ("dynamodb", "sqs", ...). ``endpoint_url`` None uses the
    default endpoint (or ``AWS_ENDPOINT_URL``, which boto3 honours); ``region`` None uses the
    environment's region. ``session`` None makes the client from a session of its own; a Lambda's
    clients share one (``new_session``), since each session loads botocore's endpoint, partition
    and retry data again: one session for the DynamoDB and SQS clients takes about 85 ms off a
    cold start's first call (bench/cold_import.py)."""
    config = client_config(
        max_attempts=max_attempts,
        adaptive=adaptive,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
    )
    with _SESSION_LOCK:
        return (session or new_session()).client(
            service,  # type: ignore[call-overload]
            endpoint_url=endpoint_url,
            region_name=region,
            config=config,
        )


def new_session() -> Session:
    """A boto3 session, to make several clients from (``make_client(..., session=...)``)."""
    return boto3.session.Session()


class RequestCounter:
    """Counts the requests boto3 clients make, per ``service:Operation`` (e.g. ``dynamodb:PutItem``).

    ``calls`` counts API calls as the code makes them (botocore's ``before-call`` event, once per
    call); ``attempts`` counts HTTP requests actually sent, SDK retries included (``request-created``,
    once per attempt). Attach it to every client whose traffic should be counted. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.attempts: Counter[str] = Counter()

    def attach(self, client: Any) -> RequestCounter:
        events = client.meta.events
        # unique_id: attaching the same counter twice to one client must not double count.
        events.register("before-call.*.*", self._on_call, unique_id=f"jobsched-calls-{id(self)}")
        events.register("request-created.*.*", self._on_attempt, unique_id=f"jobsched-attempts-{id(self)}")
        return self

    def detach(self, client: Any) -> None:
        events = client.meta.events
        events.unregister("before-call.*.*", unique_id=f"jobsched-calls-{id(self)}")
        events.unregister("request-created.*.*", unique_id=f"jobsched-attempts-{id(self)}")

    @staticmethod
    def _name(event_name: str) -> str:
        # "before-call.dynamodb.PutItem" -> "dynamodb:PutItem"
        parts = event_name.split(".", 2)
        return f"{parts[1]}:{parts[2]}" if len(parts) == 3 else event_name

    def _on_call(self, event_name: str, **kwargs: Any) -> None:
        with self._lock:
            self.calls[self._name(event_name)] += 1

    def _on_attempt(self, event_name: str, **kwargs: Any) -> None:
        with self._lock:
            self.attempts[self._name(event_name)] += 1

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.attempts.clear()

    def total(self, service: str | None = None, *, attempts: bool = False) -> int:
        """Calls (or attempts) in total, or for one service ("dynamodb", "sqs")."""
        with self._lock:
            counts = self.attempts if attempts else self.calls
            return sum(n for name, n in counts.items() if service is None or name.split(":")[0] == service)

    def snapshot(self) -> dict[str, dict[str, int]]:
        """``{"calls": {...}, "attempts": {...}}``, plain dicts sorted by name (JSON-ready)."""
        with self._lock:
            return {
                "calls": dict(sorted(self.calls.items())),
                "attempts": dict(sorted(self.attempts.items())),
            }
