"""An in-memory dead-letter sender (services/dead_letters.py), which can be told to fail."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class MemoryDeadLetters:
    sent: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    failures_left: int = 0  # the next this many sends raise

    def send(self, queue_arn: str, body: str, deduplication_id: str) -> None:
        if self.failures_left > 0:
            self.failures_left -= 1
            raise ConnectionError("the dead-letter queue did not answer")
        self.sent.append((queue_arn, json.loads(body), deduplication_id))
