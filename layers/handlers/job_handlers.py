"""This deployment's job handlers. Add yours here: a job item's ``target`` names one.

This module ships in its own Lambda layer (``HandlersLayer`` in template.yaml), carried by the
worker, which runs the handlers, and by the registrar, which marks a job whose target names no
handler here as invalid at registration. Keep its imports light: both functions load it at a cold
start. The built-ins (``log``, ``sqs_send``, ``eventbridge_put``, ``lambda_invoke``) are
registered by jobsched itself; the examples below show the handler contract and are used by the
demo.
"""

import time
from typing import Any

from jobsched.core.writes import not_exists
from jobsched.runtime.wiring import registry
from jobsched.targets.registry import RunContext


@registry.register("example.sleep")
def sleep(ctx: RunContext) -> dict[str, Any]:
    """Works for ``payload["seconds"]``, stopping early if the run is cancelled (fenced out)."""
    seconds = float(ctx.payload.get("seconds", 1))
    if ctx.cancelled.wait(timeout=seconds):
        raise RuntimeError("cancelled: lease lost")
    return {"slept": seconds}


@registry.register("example.flaky")
def flaky(ctx: RunContext) -> dict[str, Any]:
    """Fails its first ``payload["fail_attempts"]`` attempts: shows retries with backoff."""
    if ctx.attempt <= int(ctx.payload.get("fail_attempts", 1)):
        raise RuntimeError(f"failing attempt {ctx.attempt} on purpose")
    return {"attempt": ctx.attempt}


@registry.register("example.ledger")
def ledger(ctx: RunContext) -> dict[str, Any]:
    """An exactly-once effect: one ledger row per occurrence, committed with the run itself.

    The row is staged, not written: it lands in the same DynamoDB transaction as the fenced
    completion, so a worker that is fenced out (or crashes) never leaves a row behind.
    """
    table = str(ctx.payload["table"])
    ctx.stage_put(
        table,
        {"pk": ctx.idempotency_key, "job_id": ctx.job_id, "at": int(time.time())},
        condition=(not_exists("pk", "one ledger row per occurrence"),),
    )
    return {"staged": 1}
