"""Every line a job handler logs carries its run's id (issue 15): through the logger it is given
or through standard logging under the Powertools logger's name, while the runs of one batch log
concurrently on the worker's threads, as functions/worker/app.py runs them (each record in its
own copy of the context, each handler on a thread of its own)."""

from __future__ import annotations

import contextvars
import io
import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools import Logger
from harness import MINUTE, T0, build, job, seed_active
from jobsched.core.run import run_id_for
from jobsched.runtime.telemetry import bind_run
from jobsched.services.messages import parse_run_message
from jobsched.targets.registry import RunContext

RUNS = 4


def test_handler_lines_carry_their_run_id_across_the_workers_threads() -> None:
    out = io.StringIO()
    logger = Logger(service="jobsched_corr_test", logger_handler=logging.StreamHandler(out))
    # Powertools keeps thread-safe keys in one contextvar for every logger: a test that ran a
    # worker in this thread's own context before (not in a copy, as the Lambda does) left its run
    # bound here. Start from a clean context, as a Lambda invocation does.
    logger.thread_safe_clear_keys()
    together = threading.Barrier(RUNS, timeout=20)  # all runs are in their handlers at once

    def handler(ctx: RunContext) -> None:
        together.wait()
        ctx.logger.info("through the run's logger", extra={"expected": ctx.run_id})
        std = logging.getLogger("jobsched_corr_test.user")
        std.info("through std logging", extra={"expected": ctx.run_id})

    with build("memory") as env:
        env.registry.add("t", handler)
        for index in range(RUNS):
            seed_active(env, job(f"j{index}", target="t"), T0 + MINUTE)
        assert env.trigger().tick("t").claimed == RUNS
        env.clock.advance(MINUTE)
        worker = env.worker(logger_for=lambda run_id: bind_run(logger, run_id))
        deadline = env.clock.now_ms() + 900_000
        messages = [parse_run_message(json.dumps(body)) for body in env.receive_all()]
        with ThreadPoolExecutor(max_workers=RUNS) as pool:
            futures = [
                pool.submit(contextvars.copy_context().run, worker.process, message, deadline)
                for message in messages
            ]
            outcomes = [future.result(timeout=30).value for future in futures]
    logger.info("after the batch")

    assert outcomes == ["succeeded"] * RUNS
    lines: list[dict[str, Any]] = [json.loads(line) for line in out.getvalue().splitlines()]
    handled = [line for line in lines if "expected" in line]
    assert len(handled) == 2 * RUNS
    assert all(line["correlation_id"] == line["expected"] for line in handled), handled
    assert {line["expected"] for line in handled} == {run_id_for(f"j{i}", T0 + MINUTE) for i in range(RUNS)}
    # Nothing leaks out of the runs' contexts.
    assert "correlation_id" not in next(line for line in lines if line["message"] == "after the batch")
