"""One trigger invocation: a fan-out tick or one shard group's tick (docs/design.md, "Trigger
fan-out").

The scheduled event (no ``group``) with ``TriggerGroups`` K > 1 invokes the trigger
asynchronously for groups 1..K-1 and then claims group 0 itself; a group event claims its own
group and invokes nothing. With K = 1 the scheduled tick claims every shard, as before fan-out.

Losing an invocation is safe: its group's due jobs stay in the next-run index and the next tick
claims them (late, within the lookback), or the miss detector records them under their misfire
policy. Two invocations on the same shards (an overlap, a retry, a deploy changing K) race
through the same conditional claim writes as two whole-table ticks always could.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import InvokeError
from jobsched.core.shard_groups import TickRequest, parse_tick_event
from jobsched.ports import GroupInvoker, Telemetry

if TYPE_CHECKING:
    from jobsched.services.trigger import Trigger

# Invocations sent at once by a fan-out tick: each is one short request (Lambda queues it).
INVOKE_THREADS = 16


class TriggerInvocation:
    def __init__(
        self,
        trigger: Trigger,
        invoker: Callable[[], GroupInvoker],
        telemetry: Telemetry,
        cfg: SchedulerConfig,
    ) -> None:
        self._trigger = trigger
        # Built only when a fan-out tick needs it: a group invocation, and every invocation at
        # TriggerGroups = 1, never creates a Lambda client.
        self._invoker = invoker
        self._telemetry = telemetry
        self._cfg = cfg

    def handle(self, event: Mapping[str, Any], invocation_id: str, deadline_ms: int | None) -> dict[str, Any]:
        request = parse_tick_event(event, self._cfg.groups_per_tick)
        invoked, not_invoked = self._fan_out(request, invocation_id)
        shards = request.shards(self._cfg.shard_count)
        result = self._trigger.tick(invocation_id, deadline_ms, shards=shards)
        return result.summary() | {
            "group": request.group,
            "groups": request.groups,
            "shards": len(shards),
            "groups_invoked": invoked,
            "groups_not_invoked": not_invoked,
        }

    def _fan_out(self, request: TickRequest, invocation_id: str) -> tuple[int, int]:
        """Start the other groups' invocations; a failed one is logged and counted, and its
        group waits for the next tick. Returns (invoked, not invoked)."""
        events = request.others()
        if not events:
            return 0, 0
        invoker = self._invoker()

        def send(group_event: dict[str, Any]) -> bool:
            try:
                invoker.invoke(group_event)
                return True
            except InvokeError as exc:
                self._telemetry.event("fanout.failed", invocation_id, **group_event, error=str(exc)[:300])
                return False

        with ThreadPoolExecutor(max_workers=min(INVOKE_THREADS, len(events))) as pool:
            sent = list(pool.map(send, events))
        invoked = sum(sent)
        not_invoked = len(sent) - invoked
        self._telemetry.metric("GroupsInvoked", invoked)
        if not_invoked:
            self._telemetry.metric("GroupInvokeFailures", not_invoked)
        self._telemetry.event("fanout.sent", invocation_id, invoked=invoked, not_invoked=not_invoked)
        return invoked, not_invoked
