"""Trigger fan-out: which shards of the next-run index one trigger invocation claims.

A tick's work is split over ``TriggerGroups`` concurrent trigger invocations (docs/design.md,
"Trigger fan-out"). Shard ``s`` belongs to group ``s % groups``: each group owns every
``groups``-th shard, so the groups stay within one shard of each other in size whatever the
shard count, and raising ShardCount spreads the new shards over every group.

The scheduled event (EventBridge, no ``group``) is a fan-out tick: it asks for groups 1..K-1 to
be invoked and claims group 0 itself. A group event (``{"group": g, "groups": K}``) claims group
``g`` of ``K`` and invokes nothing, so no invocation ever starts a chain.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GROUP_KEY = "group"
GROUPS_KEY = "groups"


class BadTickEvent(ValueError):
    """A trigger event naming a group that does not exist (or not as integers)."""


def group_shards(shard_count: int, groups: int, group: int) -> tuple[int, ...]:
    """The shards group ``group`` of ``groups`` owns: every shard ``s`` with ``s % groups ==
    group``. Over the groups 0..groups-1 they partition range(shard_count)."""
    if shard_count < 1:
        raise ValueError(f"shard_count {shard_count} must be at least 1")
    if not 0 <= group < groups:
        raise ValueError(f"group {group} is not in 0..{groups - 1}")
    return tuple(range(group, shard_count, groups))


@dataclass(frozen=True)
class TickRequest:
    """What one trigger invocation is asked to do: claim ``group`` of ``groups``, and, for the
    scheduled tick (``fan_out``), first invoke the other groups."""

    group: int
    groups: int
    fan_out: bool

    def shards(self, shard_count: int) -> tuple[int, ...]:
        # A group event sent under a larger TriggerGroups than this invocation's ShardCount
        # allows (a deploy changing both): the groups past the last shard own nothing.
        return group_shards(shard_count, self.groups, self.group)

    def others(self) -> list[dict[str, int]]:
        """The group events the fan-out tick sends (none for a group invocation)."""
        if not self.fan_out:
            return []
        return [group_event(g, self.groups) for g in range(self.groups) if g != self.group]


def group_event(group: int, groups: int) -> dict[str, int]:
    return {GROUP_KEY: group, GROUPS_KEY: groups}


def parse_tick_event(event: Mapping[str, Any], groups: int) -> TickRequest:
    """The request a trigger event carries. ``groups`` is this deployment's TriggerGroups; a group
    event carries the sender's own count, so that a fan-out tick and the invocations it started
    agree on the partition even while a deploy changes TriggerGroups."""
    if GROUP_KEY not in event:
        return TickRequest(group=0, groups=groups, fan_out=groups > 1)
    group, sent_groups = event.get(GROUP_KEY), event.get(GROUPS_KEY)
    if not _is_int(group) or not _is_int(sent_groups):
        raise BadTickEvent(f"a group event needs integer {GROUP_KEY!r} and {GROUPS_KEY!r}: {dict(event)}")
    assert isinstance(group, int) and isinstance(sent_groups, int)
    if not 0 <= group < sent_groups:
        raise BadTickEvent(f"group {group} is not in 0..{sent_groups - 1}")
    return TickRequest(group=group, groups=sent_groups, fan_out=False)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
