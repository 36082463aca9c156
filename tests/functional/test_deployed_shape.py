"""The services follow the stack's deployed claim indexes (issue 37; template.yaml's ``ClaimShape``,
core/claim_shape.py ``DeployedShape``, ports.DEPLOYED_INDEXES), whatever the bookkeeping item says:

- ``successor`` (a new stack's default): the successor claim from the first job, with no
  ``jobsched migrate``; nothing queries ``next-run`` or ``lease`` (the tables lack them, and the
  stores here refuse the query as DynamoDB does); the switch is not read; a legacy state left on
  such a stack is converted by the reconcile pass;
- ``legacy``: today's claim, no ``due`` query, no switch read, a switch set by mistake ignored.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from harness import KINDS, MINUTE, T0, Env, build, job, seed_active
from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE, ClaimShape, DeployedShape
from jobsched.core.head_change import EPOCH
from jobsched.core.job import Misfire, MisfirePolicy
from jobsched.core.run import run_id_for
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY, bookkeeping_op
from jobsched.core.writes import STATE, Item
from jobsched.ports import IndexName, Page, Store

INVOCATION_MS = 60_000
EVERY_MS = 10_000


class Recorded:
    """The environment's store, recording each index queried and each state key read."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.indexes: list[str] = []
        self.state_keys: list[str] = []  # whole items read (GetItem, BatchGetItem)
        self.projected: list[tuple[str, tuple[str, ...], Item | None]] = []  # key, names, answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def query(self, index: IndexName, *args: Any, **kwargs: Any) -> Page:
        self.indexes.append(index)
        return self.store.query(index, *args, **kwargs)

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        if table == STATE:
            self.state_keys.append(str(key["job_id"]))
        return self.store.get(table, key, consistent)

    def get_attributes(
        self, table: str, key: Item, names: Sequence[str], consistent: bool = True
    ) -> Item | None:
        found = self.store.get_attributes(table, key, names, consistent)  # type: ignore[attr-defined]
        self.projected.append((str(key["job_id"]), tuple(names), found))
        return found

    def batch_get(self, table: str, keys: Sequence[Item], consistent: bool = False) -> list[Item]:
        if table == STATE:
            self.state_keys += [str(key["job_id"]) for key in keys]
        return self.store.batch_get(table, keys, consistent)


def recorded(env: Env) -> Recorded:
    wrapped = Recorded(env.store)
    env.store = wrapped  # type: ignore[assignment]
    return wrapped


@pytest.fixture(params=KINDS)
def succ(request: pytest.FixtureRequest) -> Iterator[Env]:
    """A stack deployed ``ClaimShape=successor``: ``due`` only, the switch never set."""
    with build(request.param, shape=DeployedShape.SUCCESSOR) as env:
        yield env


def skip_minutely(job_id: str = "j1") -> Any:
    return job(job_id, "rate(1 minute)", misfire=Misfire(policy=MisfirePolicy.SKIP))


def sleeper(env: Env) -> Any:
    def sleep(ms: int) -> None:
        env.clock.advance(ms)

    return sleep


BOOKKEEPING = str(BOOKKEEPING_KEY["job_id"])


# --- successor ----------------------------------------------------------------------------------


def test_a_successor_stack_claims_from_its_first_job_without_next_run_or_the_switch(succ: Env) -> None:
    """Registration, a tick and a worker on a fresh successor stack: the job's state records an
    epoch and no next-run position, its occurrence runs once, and no path queried ``next-run`` or
    ``lease`` or read the migration switch (the bookkeeping item has none)."""
    store = recorded(succ)
    succ.ops().register(job("j1", "rate(5 minutes)"))
    state = succ.state("j1")
    assert EPOCH in state and "next_run_at" not in state and "sched_shard" not in state
    succ.clock.advance(5 * MINUTE)
    result = succ.trigger().tick("t1")
    assert result.claimed == 1 and result.job_errors == 0
    succ.registry.register("t")(lambda _ctx: {"ok": True})
    outcomes = succ.drain(succ.worker())
    assert outcomes == ["succeeded"]
    assert set(store.indexes) <= {"due", "runs-of-job"} and "due" in store.indexes
    assert BOOKKEEPING not in store.state_keys
    assert succ.store.get(STATE, dict(BOOKKEEPING_KEY)) is None


def test_the_registrars_first_claim_on_a_successor_stack_claims_the_head_at_once(succ: Env) -> None:
    from harness import register_raw

    store = recorded(succ)
    registrar = succ.claiming_registrar()
    succ.registrar = lambda **_: registrar  # type: ignore[method-assign]
    register_raw(succ, job("j1", "rate(1 minute)").to_item())  # due within the lookahead
    assert [m.body["run_id"] for m in succ.queue.sent] == [run_id_for("j1", T0 + MINUTE, 1)]
    assert set(store.indexes) <= {"due", "runs-of-job"} and BOOKKEEPING not in store.state_keys


def test_a_successor_stacks_detector_settles_an_overdue_head_from_due_alone(succ: Env) -> None:
    succ.ops().register(skip_minutely())
    succ.clock.advance(10 * MINUTE + 1_000)  # T0+1 .. T0+8 past the 60 s grace
    store = recorded(succ)
    result = succ.detector().run("d1")
    assert result.missed_recorded >= 8 and result.job_errors == 0
    assert set(store.indexes) <= {"due", "runs-of-job"}


def test_an_idle_successor_stacks_detector_returns_reading_due_alone(succ: Env) -> None:
    succ.ops().register(job("yearly", "rate(365 days)"))
    store = recorded(succ)
    cfg_idle = succ.cfg.model_copy(update={"detector_idle_return": True})
    succ.cfg = cfg_idle
    result = succ.detector().sweep("idle", succ.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleeper(succ))
    assert result.sweeps == 1 and result.job_errors == 0
    assert set(store.indexes) <= {"due", "runs-of-job"} and "due" in store.indexes


def test_a_legacy_state_on_a_successor_stack_is_converted_by_the_pass_then_claimed(succ: Env) -> None:
    """A stack deployed ``successor`` over states never converted (no ``jobsched migrate``): no
    tick or sweep can find them (no next-run); the reconcile pass, which reads every state, converts
    each, and its head is claimed as any other."""
    definition = job("old", "rate(5 minutes)")
    seed_active(succ, definition, T0 + 5 * MINUTE)
    store = recorded(succ)
    assert succ.trigger().tick("t0").claimed == 0
    result = succ.detector().run("d1")
    assert result.job_errors == 0
    state = succ.state("old")
    assert EPOCH in state and "next_run_at" not in state
    events = succ.telemetry.named("reconcile.successor_claim")
    assert events and events[-1].fields["legacy_states"] == 1 and events[-1].fields["converted"] == 1
    succ.clock.advance(5 * MINUTE)
    assert succ.trigger().tick("t1").claimed == 1
    assert set(store.indexes) <= {"due", "runs-of-job"}


# --- legacy -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_legacy_stack_ignores_a_switch_set_on_it_and_never_queries_due(kind: str) -> None:
    """``jobsched migrate`` refuses a legacy stack; a switch set anyway must not send the
    services to an index the tables lack: the registration and the tick are today's."""
    with build(kind, shape=DeployedShape.LEGACY) as env:
        current = env.store.get(STATE, dict(BOOKKEEPING_KEY))
        on = {CLAIM_SHAPE_ATTRIBUTE: ClaimShape.SUCCESSOR.value}
        env.store.write([bookkeeping_op(current, on, (), T0)])
        store = recorded(env)
        env.ops().register(job("j1", "rate(5 minutes)"))
        assert env.state("j1")["next_run_at"] == T0 + 5 * MINUTE and EPOCH not in env.state("j1")
        env.clock.advance(5 * MINUTE)
        assert env.trigger().tick("t1").claimed == 1
        env.detector().run("d1")
        assert "due" not in store.indexes
        # Neither the registration nor the tick read the switch: the detector's pass reads the
        # bookkeeping item for its own cursor, once.
        assert store.state_keys.count(BOOKKEEPING) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_a_migrating_stack_reads_the_switch_attribute_alone(kind: str) -> None:
    """On a migrating stack the registrar and the trigger read the switch: only its
    ``claim_shape`` attribute (a projected GetItem), not the bookkeeping item, whose ``suspects``
    may be ~100 KB. (It saves bytes, not read units: DynamoDB charges the item's size.)"""
    with build(kind, shape=DeployedShape.MIGRATING) as env:
        current = env.store.get(STATE, dict(BOOKKEEPING_KEY))
        suspects = {f"job{n}": {"digest": "x" * 64, "seen_at": T0, "pass": 0} for n in range(200)}
        on = {CLAIM_SHAPE_ATTRIBUTE: ClaimShape.SUCCESSOR.value, "suspects": suspects}
        env.store.write([bookkeeping_op(current, on, (), T0)])
        store = recorded(env)
        env.ops().register(job("j1", "rate(5 minutes)"))
        assert EPOCH in env.state("j1")  # the switch is on: a head
        env.clock.advance(5 * MINUTE)
        assert env.trigger().tick("t1").claimed == 1
        assert BOOKKEEPING not in store.state_keys
        switch = [(names, found) for key, names, found in store.projected if key == BOOKKEEPING]
        assert switch == [((CLAIM_SHAPE_ATTRIBUTE,), {CLAIM_SHAPE_ATTRIBUTE: "successor"})] * 2


# --- the functions' wiring ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claim_shape", "expected"),
    [("successor", ClaimShape.SUCCESSOR), ("legacy", ClaimShape.LEGACY), (None, ClaimShape.LEGACY)],
)
def test_the_functions_take_the_claim_from_the_claim_shape_variable(
    claim_shape: str | None, expected: ClaimShape
) -> None:
    """runtime/wiring.py passes ``CLAIM_SHAPE`` (template.yaml's ClaimShape) to every service: a
    successor or legacy stack's trigger knows its claim with no read (there are no tables here: a
    read would fail and leave the tick legacy), and its detector sweeps ``due`` or ``lease``."""
    from jobsched.runtime.settings import Settings
    from jobsched.runtime.wiring import App
    from moto import mock_aws

    env = {"JOBS_TABLE": "jobs", "STATE_TABLE": "state", "RUNS_TABLE": "runs", "WORK_QUEUE_URL": "q"}
    if claim_shape is not None:
        env["CLAIM_SHAPE"] = claim_shape
    with mock_aws():
        app = App(Settings.from_env(env))
        trigger = app.trigger()
        assert trigger._heads.stack_shape("inv") is expected
        assert app.detector()._due_sweep is (expected is ClaimShape.SUCCESSOR)


def test_jobsched_top_on_a_successor_stack_reads_due_alone(succ: Env) -> None:
    """``jobsched top`` on a successor stack: the heads due soon and the runs with a lease, both
    from ``due`` (the tables lack ``next-run`` and ``lease``)."""
    from jobsched_tools.ops.top import snapshot

    succ.ops().register(job("soon", "rate(5 minutes)"))
    succ.ops().register(job("running", "rate(5 minutes)"))
    succ.clock.advance(5 * MINUTE)
    assert succ.trigger().tick("t1").claimed == 2
    store = recorded(succ)
    status = snapshot(succ.store, succ.cfg.shard_count, succ.clock.now_ms(), 600, DeployedShape.SUCCESSOR)
    assert set(store.indexes) <= {"due", "runs-of-job"}
    assert sorted(s["job_id"] for s in status.due_soon) == ["running", "soon"]  # their next heads
    assert len(status.jobs) == 2


def test_a_successor_stacks_dropped_shards_drain_without_next_run() -> None:
    """ShardCount lowered on a successor stack: the dropped shards are swept and drained from
    ``due`` alone (a successor stack has no next-run for the drain's moves of legacy states)."""
    from harness import default_cfg

    with build("memory", cfg=default_cfg(shard_count=8), shape=DeployedShape.SUCCESSOR) as env:
        for n in range(8):
            env.ops().register(job(f"j{n}", "rate(5 minutes)"))
        env.detector().run("records shard_high")
        env.cfg = default_cfg(shard_count=2)
        store = recorded(env)
        assert env.detector().run("drains").job_errors == 0
        assert set(store.indexes) <= {"due", "runs-of-job"} and "due" in store.indexes
        bookkeeping = env.store.get(STATE, dict(BOOKKEEPING_KEY))
        assert bookkeeping is not None and bookkeeping["shard_high"] == 8


def test_claim_now_on_a_successor_stack_converts_a_legacy_state_and_claims_its_head(succ: Env) -> None:
    """``Trigger.claim_now`` meeting a legacy state on a successor stack (no next-run to claim it
    from): converted, as a migrating stack's tick converts one, and its head claimed."""
    seed_active(succ, job("old", "rate(1 minute)"), T0 + MINUTE)
    result = succ.trigger().claim_now("old", "registrar")
    state = succ.state("old")
    assert EPOCH in state and "next_run_at" not in state
    assert result.claimed == 1 and [m.body["run_id"] for m in succ.queue.sent] == [
        run_id_for("old", T0 + MINUTE, int(state["epoch"]))
    ]


@pytest.mark.parametrize("shape", list(DeployedShape))
def test_the_cli_reads_a_stacks_claim_shape_from_its_tables(shape: DeployedShape) -> None:
    """A CLI target named by its tables (no stack parameters, no local state file): the claim its
    Operations register with is the one the tables' indexes say, so a job registered from the
    CLI on a successor stack gets a head, not a next-run position nothing queries."""
    from jobsched_tools.api import claim_shape_of
    from jobsched_tools.deployment import Target

    with build("dynamodb", shape=shape) as env:
        target = Target("t-jobs", env.tables["state"], env.tables["runs"], env.queue_url)
        assert claim_shape_of(target) is shape
        assert claim_shape_of(Target("j", "s", "r", "q", claim_shape="legacy")) is DeployedShape.LEGACY
