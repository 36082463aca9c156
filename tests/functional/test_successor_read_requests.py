"""Reads on the successor path (issue 37): the registrar's first claim (``claim_now``) reads the
job's occurrence items alone (HC12's ``occurrence_items``, not its whole runs partition); a claim
decides from the ``due`` entry alone whether its run is the life's last (the index projects
``max_runs``: ports.py ``DUE_PROJECTED``), with no read of the job item for it; and a backfill
reads the job's state once, on either shape."""

from __future__ import annotations

from typing import Any

import pytest
from harness import KINDS, MINUTE, T0, Env, build, job, register_raw
from jobsched.core.clock import ms_to_dt
from jobsched.core.head import is_end_marker
from jobsched.core.run import run_id_for
from jobsched.core.writes import JOBS, RUNS, STATE
from jobsched.ports import Store
from jobsched.services.head_registrar import read_job_items
from jobsched.services.operations import Operations
from jobsched.services.trigger import Trigger

SECOND = 1000


class Watched:
    """The environment's store, recording each query's index and each GetItem's table."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.queries: list[str] = []
        self.gets: list[str] = []

    def query(self, index: Any, *args: Any, **kwargs: Any) -> Any:
        self.queries.append(str(index))
        return self._inner.query(index, *args, **kwargs)

    def get(self, table: str, key: Any, consistent: bool = True) -> Any:
        self.gets.append(table)
        return self._inner.get(table, key, consistent)

    def occurrence_items(self, job_id: str) -> Any:
        self.queries.append("occurrence_items")
        return self._inner.occurrence_items(job_id)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def trigger_on(env: Env, store: Any) -> Trigger:
    options: dict[str, Any] = {"parallel_queries": False, "read_claim_shape": True}
    return Trigger(store, env.queue, env.telemetry, env.clock, env.cfg, **options)


@pytest.mark.parametrize("kind", KINDS)
def test_claim_now_reads_the_occurrence_items_not_the_whole_partition(kind: str) -> None:
    """A job with many manual runs: ``claim_now`` reads its occurrence keys (HC12), where the
    manual runs are not (``<job>@manual:`` sorts after the end marker's ``<job>@end:``)."""
    with build(kind, successor=True) as env:
        env.clock.set(T0)
        register_raw(env, job("j1", "rate(20 seconds)").to_item())  # head at 00:00:20, unclaimed
        for request in range(3):
            env.ops().trigger("j1", request_id=f"r{request}")
        watched = Watched(env.store)
        result = trigger_on(env, watched).claim_now("j1", "registrar")
        assert result.claimed == 4  # 00:00:20 .. 00:01:20, as a tick would
        assert "runs-of-job" not in watched.queries, watched.queries


@pytest.mark.parametrize("kind", KINDS)
def test_the_last_run_of_a_life_is_decided_from_the_due_entry(kind: str) -> None:
    """``max_runs`` 2, every 5 minutes: each tick claims one head, read from its ``due`` entry; the
    second is the life's last: its claim puts the end marker and the state finishes, with no read
    of the job item beyond the definition the message carries."""
    with build(kind, successor=True) as env:
        env.clock.set(T0)
        register_raw(env, job("twice", "rate(5 minutes)", max_runs=2).to_item())
        for minute in (4, 9):
            env.clock.set(T0 + minute * MINUTE + 30 * SECOND)
            assert env.trigger().tick("t").claimed == 1
        items = read_job_items(env.store, "twice")
        (marker,) = [item for item in items if is_end_marker(item)]
        assert marker["last_run_id"] == run_id_for("twice", T0 + 10 * MINUTE, 1)
        assert env.state("twice")["status"] == "finished"
        assert not any(str(i["run_id"]) == run_id_for("twice", T0 + 15 * MINUTE, 1) for i in items)
        env.clock.set(T0 + 14 * MINUTE + 30 * SECOND)
        assert env.trigger().tick("t").claimed == 0
        assert env.store.get(JOBS, {"job_id": "twice"}) is not None
        assert (
            env.store.get(RUNS, {"job_id": "twice", "run_id": run_id_for("twice", T0 + 15 * MINUTE, 1)})
            is None
        )


# --- the backfill's reads ----------------------------------------------------------------------------


@pytest.mark.parametrize("successor", [False, True], ids=["legacy", "successor"])
def test_a_backfill_reads_the_state_once_before_its_writes(successor: bool) -> None:
    """The backfill reads the job item and, once, strongly, its state (which path, today's or the
    head's): the definition is the job item's (``JobDefinition.from_item`` ignores the state's
    attributes a view merges in), so no view of the job is read before it."""
    with build("memory", successor=successor) as env:
        env.clock.set(T0)
        register_raw(env, job("b", "rate(5 minutes)").to_item())
        env.clock.set(T0 + 60 * MINUTE)
        watched = Watched(env.store)
        ops = Operations(watched, env.queue, env.telemetry, env.clock, env.cfg)
        empty = ops.backfill("b", ms_to_dt(T0 + 5 * MINUTE + SECOND), ms_to_dt(T0 + 6 * MINUTE))
        assert empty.created == [] and empty.rerun == []
        assert watched.gets.count(STATE) == 1, watched.gets
        # The successor path reads the job's items once, with the head it checks the range against.
        assert watched.queries == (["occurrence_items"] if successor else []), watched.queries
