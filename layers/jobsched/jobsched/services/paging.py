"""Reading an index or a table page by page, and every shard of a sharded index oldest first.

One place for the cursor loop, so that every reader stops at the same end-of-results signal
(DynamoDB may return a last, empty page with a cursor; that page simply yields nothing).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jobsched.core.errors import StoreError
from jobsched.core.writes import Item
from jobsched.ports import INDEX_KEYS, INDEX_TABLE, TABLE_KEY, IndexName, Store

PAGE_SIZE = 100
# Items all shards' pages may hold at once. A merge across shards keeps one page per shard in
# memory (and the trigger reads every shard's first page at once), so a page is this budget over
# the shard count: at ~2.4 KB an item (a state item as Python objects, measured by
# bench/memory.py), ~20 MB however many shards, and never below MIN_PAGE_SIZE items a query.
HELD_ITEMS_BUDGET = 8_000
MIN_PAGE_SIZE = 25


def bounded_page_size(wanted: int, shard_count: int) -> int:
    """The page size for a merge over ``shard_count`` shards: ``wanted``, or less so that one page
    per shard fits ``HELD_ITEMS_BUDGET`` (issue 18: ShardCount allows 256)."""
    return max(1, min(wanted, max(MIN_PAGE_SIZE, HELD_ITEMS_BUDGET // max(1, shard_count))))


def query_all(
    store: Store,
    index: IndexName,
    partition: Any,
    sort_from: int | None = None,
    sort_to: int | None = None,
    page_size: int = PAGE_SIZE,
    on_error: Callable[[StoreError], None] | None = None,
    consistent: bool = False,
) -> Iterator[Item]:
    """Every item of one index partition in sort order, fetched a page at a time as consumed.
    With ``on_error``, a failing page is reported and ends this partition (the caller's next
    run picks it up) instead of raising. ``consistent``: a base-table query's strong reads."""
    cursor: dict[str, Any] | None = None
    while True:
        try:
            if consistent:
                page = store.query(index, partition, sort_from, sort_to, page_size, cursor, consistent=True)
            else:
                page = store.query(index, partition, sort_from, sort_to, page_size, cursor)
        except StoreError as exc:
            if on_error is None:
                raise
            on_error(exc)
            return
        yield from page.items
        if page.cursor is None or not page.items:
            return
        cursor = page.cursor


def prefetch(items: Iterator[Item]) -> Iterator[Item]:
    """Run the first query now (in the caller's thread or pool), the rest lazily."""
    first = next(items, None)
    if first is None:
        return iter(())

    def chained() -> Iterator[Item]:
        yield first
        yield from items

    return chained()


def shard_pages(
    store: Store,
    index: IndexName,
    shard_count: int,
    sort_from: int | None,
    sort_to: int | None,
    on_error: Callable[[StoreError], None],
    parallel: bool,
    page_size: int = PAGE_SIZE,
    shards: Sequence[int] | None = None,
) -> list[Iterator[Item]]:
    """Every shard's matches (or only ``shards``', a trigger group's), paged lazily, with each
    shard's first page already read; pages of at most ``bounded_page_size(page_size, shards
    read)`` items, so the pages held stay within ``HELD_ITEMS_BUDGET`` whatever the shard count. In
    parallel the first pages cost one query's latency, not one per shard; tests and the
    simulation ask for sequential reads so that injected faults land in a reproducible order."""

    wanted = range(shard_count) if shards is None else shards
    page_size = bounded_page_size(page_size, len(wanted))

    def shard_items(shard: int) -> Iterator[Item]:
        return prefetch(query_all(store, index, shard, sort_from, sort_to, page_size, on_error))

    if parallel and len(wanted) > 1:
        with ThreadPoolExecutor(max_workers=min(16, len(wanted))) as pool:
            return list(pool.map(shard_items, wanted))
    return [shard_items(shard) for shard in wanted]


def scan_all(store: Store, table: str, page_size: int = PAGE_SIZE) -> Iterator[Item]:
    cursor: dict[str, Any] | None = None
    while True:
        page = store.scan(table, page_size, cursor)
        yield from page.items
        if page.cursor is None or not page.items:
            return
        cursor = page.cursor


def merge_oldest_first(index: IndexName, shards: list[Iterator[Item]]) -> Iterator[Item]:
    """Merge per-shard iterators (each in sort order) into one, oldest first across shards."""
    sort_attr = INDEX_KEYS[index][1]
    # Ties broken by the table key's last attribute (unique in a partition: the run id, the job
    # id), as the in-memory stores order a page, so that the order (and a simulation) is
    # deterministic.
    key_attr = TABLE_KEY[INDEX_TABLE[index]][-1]
    return heapq.merge(*shards, key=lambda item: (item[sort_attr], item[key_attr]))
