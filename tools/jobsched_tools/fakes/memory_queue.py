"""An in-memory work queue with SQS's delivery semantics, for tests and the chaos simulation.

Time comes from an injected ``Clock`` (a ``ManualClock`` in tests), so delays and visibility
timeouts are deterministic: the same sends, receives and clock moves give the same deliveries.
Like SQS it delivers at least once: a received message that is not deleted before its
visibility timeout ends is delivered again (with a new receipt; a stale receipt deletes
nothing). With ``max_receives`` set, a message received that many times moves to
``dead_letters`` instead of being delivered again (the DLQ redrive).
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jobsched.adapters.sqs_queue import check_batch, clamp_delay
from jobsched.core.clock import Clock
from jobsched.core.errors import QueueError
from jobsched.core.run import encode_body
from jobsched.ports import OutgoingMessage, SendResult


@dataclass
class QueuedMessage:
    seq: int
    body: dict[str, Any]
    sent_at_ms: int
    visible_at_ms: int
    receive_count: int = 0
    receipt: str | None = None  # the latest receipt; only it deletes the message


class MemoryWorkQueue:
    """``WorkQueue`` in memory, plus the consumer side (``receive``/``delete``).

    Failure injection: ``fail_message(message) -> bool`` makes that entry come back in
    ``SendResult.failed`` (it is not queued); ``fail_request(messages) -> bool`` makes the whole
    send raise ``QueueError`` (nothing queued). Both may be set or replaced at any time.
    """

    def __init__(
        self,
        clock: Clock,
        visibility_timeout_seconds: int = 30,
        *,
        max_receives: int | None = None,
        fail_message: Callable[[OutgoingMessage], bool] | None = None,
        fail_request: Callable[[Sequence[OutgoingMessage]], bool] | None = None,
    ) -> None:
        self.clock = clock
        self.visibility_timeout_ms = visibility_timeout_seconds * 1000
        self.max_receives = max_receives
        self.fail_message = fail_message
        self.fail_request = fail_request
        self._messages: dict[int, QueuedMessage] = {}
        self.dead_letters: list[QueuedMessage] = []
        self._seq = 0
        self._lock = threading.Lock()
        self.sent_count = 0
        self.send_calls = 0

    def send(self, messages: Sequence[OutgoingMessage]) -> SendResult:
        check_batch(messages)
        with self._lock:
            self.send_calls += 1
            if self.fail_request is not None and self.fail_request(messages):
                raise QueueError("injected failure of the whole SendMessageBatch request")
            now = self.clock.now_ms()
            failed: list[OutgoingMessage] = []
            for message in messages:
                if self.fail_message is not None and self.fail_message(message):
                    failed.append(message)
                    continue
                # Round-trip through JSON, as SQS does: the consumer sees what the wire carried.
                body = json.loads(encode_body(message.body))
                self._seq += 1
                self._messages[self._seq] = QueuedMessage(
                    seq=self._seq,
                    body=body,
                    sent_at_ms=now,
                    visible_at_ms=now + clamp_delay(message.delay_seconds) * 1000,
                )
                self.sent_count += 1
            return SendResult(failed=failed)

    def receive(
        self, max_n: int = 10, visibility_timeout_seconds: int | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """Up to ``max_n`` visible messages, oldest (first sent) first, as (receipt, body); each
        is hidden for the visibility timeout."""
        timeout_ms = (
            self.visibility_timeout_ms
            if visibility_timeout_seconds is None
            else visibility_timeout_seconds * 1000
        )
        with self._lock:
            now = self.clock.now_ms()
            out: list[tuple[str, dict[str, Any]]] = []
            # Insertion order is send order: sequence numbers only grow.
            for seq in list(self._messages):
                if len(out) >= max_n:
                    break
                message = self._messages[seq]
                if message.visible_at_ms > now:
                    continue
                if self.max_receives is not None and message.receive_count >= self.max_receives:
                    del self._messages[seq]
                    self.dead_letters.append(message)
                    continue
                message.receive_count += 1
                message.receipt = f"{seq}:{message.receive_count}"
                message.visible_at_ms = now + timeout_ms
                out.append((message.receipt, copy.deepcopy(message.body)))
            return out

    def delete(self, receipt: str) -> bool:
        """Delete the message this receipt was issued for; False if it is gone or the receipt is
        stale (the message was delivered again since)."""
        with self._lock:
            seq = int(receipt.split(":", 1)[0])
            message = self._messages.get(seq)
            if message is None or message.receipt != receipt:
                return False
            del self._messages[seq]
            return True

    def change_visibility(self, receipt: str, seconds: int) -> bool:
        """Hide (or with 0, release) a received message for ``seconds`` from now."""
        with self._lock:
            message = self._messages.get(int(receipt.split(":", 1)[0]))
            if message is None or message.receipt != receipt:
                return False
            message.visible_at_ms = self.clock.now_ms() + seconds * 1000
            return True

    def pending(self) -> int:
        """Messages not yet deleted: delayed, visible or in flight (dead letters excluded)."""
        with self._lock:
            return len(self._messages)

    def visible(self) -> int:
        with self._lock:
            now = self.clock.now_ms()
            return sum(1 for m in self._messages.values() if m.visible_at_ms <= now)

    def next_visible_at_ms(self) -> int | None:
        """When the next message becomes visible (a simulation's next event), None if empty."""
        with self._lock:
            return min((m.visible_at_ms for m in self._messages.values()), default=None)

    def messages(self) -> list[QueuedMessage]:
        """A copy of the queued messages, oldest first (for assertions)."""
        with self._lock:
            return [copy.deepcopy(message) for message in self._messages.values()]
