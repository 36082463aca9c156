"""The handler's run: in a thread, heartbeating until it returns, times out or is fenced.

``Worker.execute`` (services/worker.py) runs it with the worker's heartbeat; a handler's thread
cannot be killed, so one that outlives its run ends the sandbox (``SANDBOX_MUST_END``).
"""

from __future__ import annotations

import contextvars
import threading
import traceback
from collections.abc import Callable
from typing import Any

from jobsched.core.clock import Clock, Waiter
from jobsched.core.config import SchedulerConfig
from jobsched.ports import Telemetry
from jobsched.services.worker_results import FENCED_OUT, HandlerResult, Started
from jobsched.targets.registry import HandlerRegistry, PermanentHandlerError

# Set once a handler's thread outlived its run in this process: a Python thread cannot be killed,
# and a Lambda sandbox thaws it beside whatever it runs next. The worker function ends its
# process after the batch (functions/worker/app.py), so the thread never runs beside a later
# attempt or occurrence: its run stays ``running`` under a lease that lapses only after the
# Lambda deadline, and the miss detector recovers it once the process is gone.
SANDBOX_MUST_END = threading.Event()


def run_handler(
    started: Started,
    registry: HandlerRegistry,
    waiter: Waiter,
    clock: Clock,
    cfg: SchedulerConfig,
    telemetry: Telemetry,
    heartbeat: Callable[[Started], bool],
) -> HandlerResult:
    """Run the handler in a thread, heartbeating until it returns, times out or is fenced."""
    handler = registry.get(started.definition.target)
    if handler is None:
        known = ", ".join(registry.names()) or "none"
        return HandlerResult(
            False,
            f"no handler named {started.definition.target!r} (registered: {known})",
            permanent=True,
        )
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = handler(started.context)
        except Exception as exc:  # a handler's failure is data for the retry policy
            outcome["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
            # ... unless no retry can mend it (the stack's allow-lists refuse the call).
            outcome["permanent"] = isinstance(exc, PermanentHandlerError)
        finally:
            done.set()

    # The handler's thread starts in a copy of this thread's context: what was bound to the
    # run here (the logger's run id: runtime/telemetry.py bind_run) holds there too.
    thread = threading.Thread(
        target=contextvars.copy_context().run,
        args=(run,),
        name=f"handler-{started.message.run_id}",
        daemon=True,
    )
    thread.start()
    timeout_at = started.started_at + started.definition.timeout_seconds * 1000
    last_moment = started.deadline_ms - cfg.deadline_margin_ms
    timeout_at = min(timeout_at, last_moment)
    while not waiter.wait(done, cfg.heartbeat_seconds * 1000):
        now = clock.now_ms()
        if now >= timeout_at and not started.context.cancelled.is_set():
            # Ask the handler to stop, and keep its lease while it does: recording the
            # timeout now would let a retry or the next occurrence start beside it.
            started.context.cancelled.set()
            telemetry.event("run.timed_out", started.message.run_id, cancelled=True)
        if started.context.cancelled.is_set() and now >= last_moment:
            SANDBOX_MUST_END.set()
            telemetry.event("run.abandoned", started.message.run_id, thread=thread.name)
            return HandlerResult(False, "handler ignored its cancellation", abandoned=True)
        if not heartbeat(started):
            SANDBOX_MUST_END.set()  # the handler's thread may run on: not beside our next run
            return FENCED_OUT
    if clock.now_ms() > timeout_at or started.context.cancelled.is_set():
        return HandlerResult(False, f"timed out after {started.definition.timeout_seconds} s")
    if started.context.staging_error is not None:
        # No attempt could commit what it staged: fail now, never retry.
        return HandlerResult(False, started.context.staging_error, permanent=True)
    if "error" in outcome:
        return HandlerResult(False, str(outcome["error"]), permanent=bool(outcome.get("permanent")))
    return HandlerResult(True, staged=list(started.context.staged))
