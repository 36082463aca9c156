"""The trigger's shard groups (core/shard_groups.py): a partition of the shards, and the events a
fan-out tick and a group invocation carry."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jobsched.core.config import MAX_SHARDS, SchedulerConfig
from jobsched.core.shard_groups import BadTickEvent, group_event, group_shards, parse_tick_event


@st.composite
def shards_and_groups(draw: st.DrawFn) -> tuple[int, int]:
    shard_count = draw(st.integers(1, MAX_SHARDS))
    return shard_count, draw(st.integers(1, shard_count))


@given(shards_and_groups())
def test_the_groups_partition_the_shards_evenly(case: tuple[int, int]) -> None:
    shard_count, groups = case
    owned = [group_shards(shard_count, groups, g) for g in range(groups)]
    every = [shard for shards in owned for shard in shards]
    assert sorted(every) == list(range(shard_count))  # each shard once: none skipped, none shared
    sizes = [len(shards) for shards in owned]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
    for g, shards in enumerate(owned):
        assert all(shard % groups == g for shard in shards)


def test_one_group_owns_every_shard() -> None:
    assert group_shards(8, 1, 0) == tuple(range(8))
    assert group_shards(8, 3, 2) == (2, 5)


@pytest.mark.parametrize("group", [-1, 3])
def test_a_group_outside_the_count_is_refused(group: int) -> None:
    with pytest.raises(ValueError):
        group_shards(8, 3, group)


def test_the_scheduled_event_fans_out_to_the_other_groups_and_keeps_group_0() -> None:
    scheduled = {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}
    request = parse_tick_event(scheduled, groups=4)
    assert (request.group, request.groups, request.fan_out) == (0, 4, True)
    assert request.others() == [group_event(g, 4) for g in (1, 2, 3)]
    assert request.shards(8) == (0, 4)


def test_with_one_group_the_scheduled_tick_claims_everything_and_invokes_nothing() -> None:
    request = parse_tick_event({"detail": {}}, groups=1)
    assert not request.fan_out and request.others() == []
    assert request.shards(8) == tuple(range(8))


def test_a_group_event_uses_its_own_count_and_never_fans_out() -> None:
    # Sent by a tick deployed with 4 groups, received by an invocation configured with 2 (a
    # deploy in flight): the partition is the sender's, so the 4 invocations still cover it.
    request = parse_tick_event({"group": 3, "groups": 4}, groups=2)
    assert (request.group, request.groups, request.fan_out) == (3, 4, False)
    assert request.others() == []
    assert request.shards(8) == (3, 7)
    assert request.shards(2) == ()  # more groups than shards: this one owns none


@pytest.mark.parametrize(
    "event",
    [
        {"group": 2, "groups": 2},
        {"group": -1, "groups": 2},
        {"group": "1", "groups": 2},
        {"group": True, "groups": 2},
        {"group": 0},
    ],
)
def test_a_malformed_group_event_is_refused(event: dict[str, object]) -> None:
    with pytest.raises(BadTickEvent):
        parse_tick_event(event, groups=2)


def test_trigger_groups_above_the_shards_act_as_a_group_per_shard() -> None:
    assert SchedulerConfig(shard_count=4, trigger_groups=4).groups_per_tick == 4
    # More groups than shards: a group per shard, never an invocation with nothing to claim.
    assert SchedulerConfig(shard_count=4, trigger_groups=16).groups_per_tick == 4
