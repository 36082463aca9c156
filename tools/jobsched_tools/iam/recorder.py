"""``CallRecorder``: records every AWS call made while installed (a wrapper around botocore's
``BaseClient._make_api_call``, which every client method goes through), as the IAM actions and
resource ARNs it is authorised by (iam/calls.py), tagged with the function acting at the time."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from jobsched_tools.iam.calls import Call, authorisations, passed_roles


class CallRecorder:
    """Records the AWS calls made while ``installed()``, tagged with the function named by the
    innermost ``acting(function)`` (calls made while no function acts, such as a test's own setup,
    are not recorded). The tag is process-wide, not per thread: a function's worker threads
    (the handler's, the fan-out's) are tagged with it too, so run one function at a time."""

    def __init__(self, account: str) -> None:
        self.account = account
        self.calls: list[Call] = []
        # Every request while installed, acting or not: (function or None, service, operation, params).
        self.requests: list[tuple[str | None, str, str, Mapping[str, Any]]] = []
        self._acting: str | None = None
        self._lock = threading.Lock()

    @contextmanager
    def acting(self, function: str) -> Iterator[None]:
        before, self._acting = self._acting, function
        try:
            yield
        finally:
            self._acting = before

    @contextmanager
    def outside(self) -> Iterator[None]:
        """Calls made meanwhile are no function's (a test's own writes, racing a function)."""
        before, self._acting = self._acting, None
        try:
            yield
        finally:
            self._acting = before

    def declare(
        self,
        function: str,
        action: str,
        resource: str,
        origin: str,
        context: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """A call AWS makes with the function's role on its behalf (an event source mapping's
        polling, a service's use of a customer-managed key), which no code here makes."""
        with self._lock:
            self.calls.append(Call(function, action, resource, origin, context))

    def record(self, service: str, region: str, operation: str, params: Mapping[str, Any]) -> None:
        function = self._acting
        with self._lock:
            self.requests.append((function, service, operation, params))
            if function is None:
                return
            for action, resource in authorisations(service, operation, params, region, self.account):
                self.calls.append(Call(function, action, resource))
            for action, resource, context in passed_roles(service, operation, params):
                self.calls.append(Call(function, action, resource, context=context))

    @contextmanager
    def installed(self) -> Iterator[CallRecorder]:
        from botocore.client import BaseClient

        original: Callable[..., Any] = BaseClient._make_api_call  # type: ignore[attr-defined]
        recorder = self

        def recording(client: Any, operation_name: str, api_params: Mapping[str, Any]) -> Any:
            meta = client.meta
            recorder.record(meta.service_model.service_name, meta.region_name, operation_name, api_params)
            return original(client, operation_name, api_params)

        BaseClient._make_api_call = recording  # type: ignore[attr-defined]
        try:
            yield self
        finally:
            BaseClient._make_api_call = original  # type: ignore[attr-defined]

    def distinct(self, function: str | None = None) -> list[Call]:
        return sorted({c for c in self.calls if function is None or c.function == function})
