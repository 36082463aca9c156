"""WorkerRecordConcurrency is honoured: N records of one batch run at once, on N threads.

asyncio.to_thread's default pool has min(32, CPUs + 4) threads (6 on 2 CPUs), which silently
capped the setting. Here N, more than that default, records all wait on one barrier: they can
only pass it if all N run at the same time. (The barrier's timeout only ends a broken run.)
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import pytest
from jobsched.runtime import wiring
from jobsched.services.worker import Outcome
from lambda_apps import FakeContext, load_app

DEFAULT_POOL = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default executor
N = DEFAULT_POOL + 4


class BarrierWorker:
    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=30)
        self.threads: set[str] = set()
        self.lock = threading.Lock()

    def process(self, _message: Any, _deadline_ms: int) -> Outcome:
        with self.lock:
            self.threads.add(threading.current_thread().name)
        self.barrier.wait()  # BrokenBarrierError (a failed record) unless all N run at once
        return Outcome.SUCCEEDED


def run_message(index: int) -> str:
    return json.dumps(
        {
            "v": 1,
            "run_id": f"job-{index}@2026-12-02T11:10:00Z",
            "job_id": f"job-{index}",
            "version": 1,
            "attempt": 1,
            "scheduled_at": 1796209800000,
            "definition": {"job_id": f"job-{index}", "schedule": "rate(1 minute)", "target": "log"},
        }
    )


@pytest.mark.usefixtures("aws")
def test_n_records_of_a_batch_run_at_once_on_n_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_RECORD_CONCURRENCY", str(N))
    wiring.reset_app()
    fake = BarrierWorker(N)
    monkeypatch.setattr(wiring.App, "worker", lambda _self, _worker_id: fake)
    records = [
        {
            "messageId": f"m-{i}",
            "receiptHandle": f"r-{i}",
            "body": run_message(i),
            "attributes": {"ApproximateReceiveCount": "1"},
            "messageAttributes": {},
            "md5OfBody": "",
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:work",
            "awsRegion": "us-east-1",
        }
        for i in range(N)
    ]

    result = load_app("worker").lambda_handler({"Records": records}, FakeContext("work-barrier"))

    assert result == {"batchItemFailures": []}
    assert len(fake.threads) == N
