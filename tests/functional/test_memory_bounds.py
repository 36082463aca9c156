"""Memory bounded whatever the settings (issue 18, part 3): the trigger's and the detector's pages
shrink as shards grow, so the pages held at once stay within a budget, and the detector holds
no list of its overdue backlog (it counts it streaming, then handles it a job at a time).

Items the store returns are tracked while alive (CPython frees a dict when its last reference
goes), so a test sees how many the service holds at its peak, with no wall clock or RSS involved.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from harness import MINUTE, T0, Env, build, default_cfg, job, seed_active
from jobsched.core.job import Misfire, MisfirePolicy
from jobsched.ports import Page, Store
from jobsched.services import paging

HOUR = 60 * MINUTE


class Tracked(dict[str, Any]):
    live = 0
    peak = 0

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        Tracked.live += 1
        Tracked.peak = max(Tracked.peak, Tracked.live)

    def __del__(self) -> None:
        Tracked.live -= 1


class SpyStore:
    """Records each query's Limit and returns its items as ``Tracked``."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.limits: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def query(
        self,
        index: Any,
        partition: Any,
        sort_from: Any = None,
        sort_to: Any = None,
        limit: int = 100,
        cursor: Any = None,
        consistent: bool = False,
    ) -> Page:
        self.limits.append(limit)
        page = self._inner.query(index, partition, sort_from, sort_to, limit, cursor, consistent)
        return Page([Tracked(item) for item in page.items], page.cursor)


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A budget of 8 items held (4 shards: pages of 2), so a test needs few jobs."""
    monkeypatch.setattr(paging, "HELD_ITEMS_BUDGET", 8)
    monkeypatch.setattr(paging, "MIN_PAGE_SIZE", 1)
    Tracked.live = Tracked.peak = 0
    yield 8


def test_page_size_shrinks_with_the_shard_count_within_the_budget() -> None:
    assert paging.bounded_page_size(1000, 8) == 1000  # the default: unchanged
    assert paging.bounded_page_size(1000, 256) * 256 <= paging.HELD_ITEMS_BUDGET
    assert paging.bounded_page_size(1000, 256) >= paging.MIN_PAGE_SIZE
    assert paging.bounded_page_size(100, 4) == 100


def seed_due(env: Env, count: int, due: int, **fields: Any) -> None:
    for index in range(count):
        seed_active(env, job(f"j{index:03d}", "rate(1 hour)", **fields), due)


def test_the_trigger_never_asks_for_more_than_its_share_of_the_budget(small_budget: int) -> None:
    with build("memory", default_cfg(shard_count=4)) as env:
        seed_due(env, 40, T0 + 5_000)
        spy = SpyStore(env.store)
        env.store = spy  # type: ignore[assignment]
        result = env.trigger().tick("t")
        assert result.claimed == 40
        assert spy.limits and max(spy.limits) <= small_budget // 4
        # Every shard's page at once, and the claimers' share: never the whole backlog.
        assert Tracked.peak <= small_budget + 2 * env.cfg.claim_concurrency


def test_the_detector_holds_no_list_of_its_backlog_and_still_degrades(small_budget: int) -> None:
    cfg = default_cfg(shard_count=4, detector_degrade_backlog=30, detector_max_items=100_000)
    with build("memory", cfg) as env:
        misfire = Misfire(policy=MisfirePolicy.RUN_ALL, max_catchup=2)
        seed_due(env, 40, T0, misfire=misfire)
        env.clock.set(T0 + 2 * HOUR)
        spy = SpyStore(env.store)
        env.store = spy  # type: ignore[assignment]
        result = env.detector().run("d")
        assert result.degraded  # 40 overdue > 30: counted, not held
        assert result.jobs_caught_up == 40
        assert max(spy.limits) <= small_budget // 4
        # One page per shard while counting, then one job at a time: 40 were never held together.
        assert Tracked.peak <= 2 * small_budget + 2  # (the lease and next-run merges may both be open)
