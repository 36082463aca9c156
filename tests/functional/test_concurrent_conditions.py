"""Racing conditional writes against the local moto server: exactly one winner per item.

jobsched's exactly-once argument rests on DynamoDB's conditional writes being atomic. moto's are
not (see ../shared/README.md); ``start_moto_server`` serialises DynamoDB requests so that they
are. These tests race 8 threads, and then 3 separate processes (each with its own client and
DynamoStore), on the same items: creating them with ``attribute_not_exists`` and bumping their
version with ``version = :read``. Every item must have exactly one winner, and the stored item
must name that winner.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from jobsched.adapters.aws import make_client
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.core.errors import ConditionFailed
from jobsched.core.run import run_key
from jobsched.core.writes import RUNS, Put, Update, eq, not_exists

REGION = "us-east-1"
THREADS = 8
PROCESSES = 3
# Items per race; JOBSCHED_RACE_ITEMS=500 for a longer run. Every racer tries every item, so a
# race costs racers x items x 2 requests (moto serves roughly 40-300 a second, load permitting).
THREAD_ITEMS = int(os.environ.get("JOBSCHED_RACE_ITEMS", "50"))
PROCESS_ITEMS = THREAD_ITEMS * 3 // 2

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    # Imported here so that the spawned racer processes, which import this module, stay light.
    from jobsched_tools.emulator.local_moto import start_moto_server

    with start_moto_server() as moto:
        yield moto.endpoint_url


_prefixes = iter(range(10**6))


@pytest.fixture
def tables(moto_endpoint: str) -> tuple[str, str, str]:
    from jobsched_tools.emulator.provision import provision

    resources = provision(
        make_client("dynamodb", moto_endpoint, REGION),
        make_client("sqs", moto_endpoint, REGION),
        prefix=f"race{next(_prefixes)}",
        parameters={"ClaimShape": "legacy"},
    )
    return moto_endpoint, resources.jobs_table, resources.runs_table


def make_store(endpoint: str, jobs_table: str, runs_table: str) -> DynamoStore:
    # Enough connections for one racer's requests; retries as in production.
    state_table = jobs_table.removesuffix("-jobs") + "-state"  # provision names <prefix>-<table>
    return DynamoStore(make_client("dynamodb", endpoint, REGION), jobs_table, state_table, runs_table)


def race(store: DynamoStore, racer: str, ids: list[str], mode: str) -> list[str]:
    """Try every item; return the ids this racer won."""
    won: list[str] = []
    for run_id in ids:
        try:
            if mode == "create":
                store.write(
                    [
                        Put(
                            RUNS,
                            {**run_key(run_id), "winner": racer, "version": 0},
                            (not_exists("run_id", "one creator per run"),),
                            "claim",
                        )
                    ]
                )
            else:
                store.update(
                    Update(
                        RUNS,
                        run_key(run_id),
                        (eq("version", 0, "one bump from the version read"),),
                        "bump",
                        set={"version": 1, "owner": racer},
                    )
                )
        except ConditionFailed:
            continue
        won.append(run_id)
    return won


def race_both(store: DynamoStore, racer: str, ids: list[str], barrier: Any) -> dict[str, list[str]]:
    """Race to create every item, then (all racers again at the start line) to bump it."""
    wins = {"create": race(store, racer, ids, "create")}
    barrier.wait(timeout=120)
    wins["bump"] = race(store, racer, ids, "bump")
    return wins


def check_one_winner(store: DynamoStore, ids: list[str], wins: dict[str, dict[str, list[str]]]) -> None:
    items: dict[str, dict[str, Any]] = {}
    cursor = None
    while True:
        page = store.scan(RUNS, limit=1000, cursor=cursor)
        items.update({item["run_id"]: item for item in page.items})
        cursor = page.cursor
        if cursor is None:
            break
    for mode, field in (("create", "winner"), ("bump", "owner")):
        counts = Counter(run_id for racer_wins in wins.values() for run_id in racer_wins[mode])
        doubles = {run_id: n for run_id, n in counts.items() if n > 1}
        assert doubles == {}, f"{mode}: {len(doubles)} of {len(ids)} items with more than one winner"
        assert set(counts) == set(ids), f"{mode}: every item has a winner"
        for racer, racer_wins in wins.items():
            for run_id in racer_wins[mode]:
                assert items[run_id][field] == racer, f"{mode}: the stored item names its winner"
        assert all(items[run_id]["version"] == 1 for run_id in ids)


def test_threads_race_for_each_item(tables: tuple[str, str, str]) -> None:
    endpoint, jobs_table, runs_table = tables
    ids = [f"job-{i}@2026-01-01T00:00:00Z" for i in range(THREAD_ITEMS)]
    barrier = threading.Barrier(THREADS)
    wins: dict[str, dict[str, list[str]]] = {}
    errors: list[BaseException] = []

    def racer(name: str) -> None:
        try:
            store = make_store(endpoint, jobs_table, runs_table)
            store.get(RUNS, run_key("warm@up"))  # connect before the start line
            barrier.wait(timeout=60)
            # Every racer goes through the items in the same order, so that they collide.
            wins[name] = race_both(store, name, ids, barrier)
        except BaseException as error:  # reported below
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=racer, args=(f"t{i}",)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert len(wins) == THREADS
    check_one_winner(make_store(*tables), ids, wins)


def process_racer(
    endpoint: str,
    jobs_table: str,
    runs_table: str,
    name: str,
    ids: list[str],
    barrier: Any,
    results: Any,
) -> None:
    """Runs in a spawned process: its own interpreter, client and store."""
    try:
        store = make_store(endpoint, jobs_table, runs_table)
        store.get(RUNS, run_key("warm@up"))  # connect before the start line
        barrier.wait(timeout=60)
        results.put((name, race_both(store, name, ids, barrier), None))
    except BaseException as error:
        barrier.abort()
        results.put((name, {}, repr(error)))


def test_processes_race_for_each_item(tables: tuple[str, str, str]) -> None:
    endpoint, jobs_table, runs_table = tables
    ids = [f"proc-{i}@2026-01-01T00:00:00Z" for i in range(PROCESS_ITEMS)]
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    processes = [
        context.Process(
            target=process_racer,
            args=(endpoint, jobs_table, runs_table, f"p{i}", ids, barrier, results),
        )
        for i in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    try:
        outcomes = [results.get(timeout=120) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    assert [error for _, _, error in outcomes if error] == []
    wins = {name: won for name, won, _ in outcomes}
    assert len(wins) == PROCESSES
    check_one_winner(make_store(*tables), ids, wins)
