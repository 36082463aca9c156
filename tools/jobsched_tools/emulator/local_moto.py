"""A local AWS (moto) server whose DynamoDB is atomic, for the local stack and concurrency tests.

moto evaluates a conditional write by reading, checking and writing in plain Python with no lock,
and its HTTP server handles each request on its own thread: two racing conditional writes can
both succeed, which real DynamoDB never allows. This server wraps moto's WSGI application so that
DynamoDB requests (header ``X-Amz-Target: DynamoDB_20120810.*``) run one at a time, which gives
every DynamoDB operation the atomicity DynamoDB guarantees per item and per transaction. Other
services (SQS, ...) stay concurrent.

    with start_moto_server() as moto:
        client = boto3.client("dynamodb", endpoint_url=moto.endpoint_url)

Or from a shell: ``python -m jobsched_tools.emulator.local_moto --port 5000`` (serves until killed).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterable
from types import FrameType, TracebackType
from typing import Any

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

WsgiApp = Callable[[dict[str, Any], Any], Iterable[bytes]]


class SerializedDynamoApp:
    """WSGI middleware: DynamoDB requests (and moto's own reset) run one at a time, under one lock
    held until the response body has been produced."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.serialized_requests = 0

    @staticmethod
    def is_serialized(environ: dict[str, Any]) -> bool:
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        return target.startswith("DynamoDB_") or str(environ.get("PATH_INFO", "")).startswith("/moto-api/")

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if not self.is_serialized(environ):
            return self.app(environ, start_response)
        with self.lock:
            self.serialized_requests += 1
            result = self.app(environ, start_response)
            try:
                # Drain the body inside the lock: a lazily generated response must not run
                # outside it.
                return [bytes(chunk) for chunk in result]
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()


class _QuietRequestHandler(MotoRequestHandler):
    """moto's request handler without the access log line per request (thousands per test run
    on stderr, and measurable time); errors are still logged."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


class _SerializedThreadedMotoServer(ThreadedMotoServer):
    """moto's ThreadedMotoServer with the app wrapped. It overrides ``_server_entry``, where
    moto 5 builds ``DomainDispatcherApplication(create_backend_app)`` and serves it; the body
    mirrors moto's with the one change."""

    def __init__(self, ip_address: str, port: int, access_log: bool) -> None:
        super().__init__(ip_address=ip_address, port=port, verbose=False)
        self.app = SerializedDynamoApp(DomainDispatcherApplication(create_backend_app))
        self.handler = MotoRequestHandler if access_log else _QuietRequestHandler

    def _server_entry(self) -> None:
        self._server = make_server(
            self._ip_address,
            self._port,
            self.app,
            True,  # threaded: SQS long polls and other services stay concurrent
            request_handler=self.handler,
        )
        self._server_ready_event.set()
        self._server.serve_forever()


class LocalMoto:
    """A running local moto server. ``endpoint_url`` is what boto3 clients take."""

    def __init__(self, server: _SerializedThreadedMotoServer) -> None:
        self._server = server
        host, port = server.get_host_and_port()
        self.host = host
        self.port = port
        self.endpoint_url = f"http://{host}:{port}"
        self._stopped = False

    @property
    def serialized_requests(self) -> int:
        """DynamoDB requests served so far (each under the lock)."""
        return self._server.app.serialized_requests

    def reset(self) -> None:
        """Forget every resource (POST /moto-api/reset)."""
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._server.stop()

    def __enter__(self) -> LocalMoto:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


# How often a waiting long poll looks again for messages that became visible without a send.
LONG_POLL_RECHECK_S = 0.05
_long_poll_patched = False


def _long_polls_see_delayed_messages() -> None:
    """moto's long poll waits on a condition that only a *send* notifies, re-checking once a
    second: a delayed message (the trigger sends every run with a delay to its scheduled second)
    or one whose visibility timeout ran out is received up to a second after it became visible.
    SQS returns it when it becomes visible, so without this the local stack's start lag would
    measure moto's re-check interval. Capping each wait at ``LONG_POLL_RECHECK_S`` keeps moto's
    own loop, deadline and notification, and only makes it look again sooner."""
    global _long_poll_patched
    if _long_poll_patched:
        return
    from moto.sqs.models import Queue

    original = Queue.wait_for_messages

    def wait_for_messages(self: Any, timeout: int) -> None:
        original(self, min(timeout, LONG_POLL_RECHECK_S))  # type: ignore[arg-type]

    Queue.wait_for_messages = wait_for_messages  # type: ignore[method-assign]
    _long_poll_patched = True


def start_moto_server(
    port: int = 0, host: str = "127.0.0.1", access_log: bool = False, lean: bool = False
) -> LocalMoto:
    """Start a moto server on ``host:port`` (0: any free port) in a daemon thread.
    ``access_log`` prints werkzeug's line per request on stderr. ``lean`` applies
    ``moto_fast`` to this process (item-level transaction backups, no instance tracking,
    expiring stream iterators): what a server that runs for hours needs, such as the local
    stack's."""
    if lean:
        from jobsched_tools.emulator import moto_fast

        moto_fast.apply()
    _long_polls_see_delayed_messages()
    server = _SerializedThreadedMotoServer(ip_address=host, port=port, access_log=access_log)
    server.start()
    return LocalMoto(server)


class MotoProcess:
    """A moto server in its own process: benchmarks measure it without sharing the client's GIL,
    as a real endpoint would not. Same interface as ``LocalMoto``."""

    def __init__(self, process: subprocess.Popen[str], endpoint_url: str) -> None:
        self._process = process
        self.endpoint_url = endpoint_url

    @property
    def pid(self) -> int:
        """The server process's id (the fan-out bench reads its CPU time)."""
        return self._process.pid

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def __enter__(self) -> MotoProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_moto_process(host: str = "127.0.0.1", fast_transactions: bool = False) -> MotoProcess:
    """Start ``python -m jobsched_tools.emulator.local_moto`` on a free port and wait for its endpoint."""
    command = [sys.executable, "-m", "jobsched_tools.emulator.local_moto", "--port", "0", "--host", host]
    if fast_transactions:
        command.append("--fast-transactions")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    endpoint = process.stdout.readline().strip()
    if not endpoint.startswith("http"):
        process.kill()
        raise RuntimeError(f"moto server process did not start (printed {endpoint!r})")
    return MotoProcess(process, endpoint)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m jobsched_tools.emulator.local_moto",
        description="Serve moto locally with atomic (serialised) DynamoDB requests.",
    )
    parser.add_argument("--port", type=int, default=5000, help="port (0: any free port)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--access-log", action="store_true", help="log every request on stderr")
    parser.add_argument(
        "--fast-transactions",
        action="store_true",
        help="back up only the items a transaction names, keep no model instances, expire stream "
        "iterators (emulator/moto_fast.py): for a server that runs for long",
    )
    args = parser.parse_args(argv)
    moto = start_moto_server(args.port, args.host, access_log=args.access_log, lean=args.fast_transactions)
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(moto.endpoint_url, flush=True)
    try:
        stop.wait()
    finally:
        moto.stop()


if __name__ == "__main__":
    main()
