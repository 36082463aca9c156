"""The trigger's successor claim (issue 37, shape f; services/head_trigger.py): with the stack's
migration switch on, a tick claims the heads in the ``due`` index, one conditional put each, and
sends a claimed run's message only once its put has landed. Jobs are registered with the core's
first registration (``plan_head_change`` + ``head_change_ops``) until the successor registrar lands."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from harness import KINDS, MINUTE, T0, Env, build, default_cfg, job, seed_active
from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE
from jobsched.core.config import SchedulerConfig
from jobsched.core.head import is_head
from jobsched.core.head_change import HeadChangePlan, plan_head_change
from jobsched.core.job import JobDefinition
from jobsched.core.run import run_id_for, run_key
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY, bookkeeping_op
from jobsched.core.transitions.head_change import head_change_ops
from jobsched.core.transitions.head_settle import settle_head_ops
from jobsched.core.writes import JOBS, RUNS, STATE, Item, Put
from jobsched.ports import OutgoingMessage, SendResult, Store
from jobsched.services.trigger import Trigger
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry
from jobsched_tools.fakes.metering import MeteringStore

SECOND = 1000


def put_job(env: Env, definition: JobDefinition) -> None:
    item = {**definition.to_item(), "status": "active", "def_hash": definition.definition_hash()}
    env.store.write([Put(JOBS, item, condition=(), label="person puts job")])


def change(env: Env, definition: JobDefinition, now: int | None = None) -> HeadChangePlan:
    """Apply the job item's change in the successor form (the registrar's, until it lands): the
    first registration, or a change of a registered job against its head as read."""
    now = env.clock.now_ms() if now is None else now
    put_job(env, definition)
    state = env.store.get(STATE, {"job_id": definition.job_id})
    plan = plan_head_change(
        definition.job_id,
        state,
        head_of(env, definition.job_id),
        definition,
        definition.definition_hash(),
        now,
        env.cfg,
    )
    assert isinstance(plan, HeadChangePlan), plan
    env.store.write(head_change_ops(plan, now, env.cfg))
    return plan


def head_of(env: Env, job_id: str) -> Item | None:
    items = env.ops().runs(job_id, limit=1000)
    by_id = {str(item["run_id"]): item for item in items}
    heads = [item for item in items if is_head(item, by_id.get(str(item.get("next_key"))))]
    assert len(heads) <= 1, heads
    return heads[0] if heads else None


def key(job_id: str, at: int, epoch: int = 1) -> str:
    return run_id_for(job_id, at, epoch)


def sent_ids(env: Env) -> list[str]:
    return [str(m.body["run_id"]) for m in env.queue.sent]


class Hooked:
    """The environment's store, calling ``hook`` once, right after the first eventually consistent
    GetItem of the runs table (the claimer's read of a head's successor, which found it free), or
    after the first GetItem of ``after_table`` (the job item's): a racer acts between the
    claimer's read and its put."""

    def __init__(self, inner: Store, hook: Callable[[], None], after_table: str = RUNS) -> None:
        self._inner = inner
        self._hook: Callable[[], None] | None = hook
        self._after_table = after_table
        self.queries: list[str] = []

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        item = self._inner.get(table, key, consistent)
        watched = table == self._after_table and (table != RUNS or not consistent)
        if watched and self._hook is not None:
            hook, self._hook = self._hook, None
            hook()
        return item

    def query(self, index: Any, *args: Any, **kwargs: Any) -> Any:
        self.queries.append(str(index))
        return self._inner.query(index, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def trigger_on(env: Env, store: Any, claimer_id: str | None = None) -> Trigger:
    options: dict[str, Any] = {"parallel_queries": False, "claimer_id": claimer_id, "read_claim_shape": True}
    return Trigger(store, env.queue, env.telemetry, env.clock, env.cfg, **options)


# --- the claim --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_due_head_is_claimed_once_and_its_message_sent_after_its_put(kind: str) -> None:
    with build(kind, successor=True) as env:
        change(env, job("j1"))
        head = key("j1", T0 + MINUTE)

        class PutFirst:
            """A queue that checks, at each send, that the run's successor is in the store."""

            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def send(self, messages: Sequence[OutgoingMessage]) -> SendResult:
                for m in messages:
                    run = env.store.get(RUNS, run_key(str(m.body["run_id"])))
                    assert run is not None and env.store.get(RUNS, run_key(str(run["next_key"]))) is not None
                result: SendResult = self.inner.send(messages)
                return result

        trigger = Trigger(
            env.store,
            PutFirst(env.queue),
            env.telemetry,
            env.clock,
            env.cfg,
            parallel_queries=False,
            read_claim_shape=True,
        )
        first = trigger.tick("t1")
        again = env.trigger().tick("t2")
        assert (first.claimed, first.dispatched, again.claimed, again.dispatched) == (1, 1, 0, 0)
        assert sent_ids(env) == [head]
        successor = env.run(key("j1", T0 + 2 * MINUTE))
        assert successor["after_run_id"] == head and successor["status"] == "scheduled"
        assert successor["through"] == T0 + MINUTE
        # Nothing was written on N or on the state: N is claimed by its successor alone.
        assert env.run(head)["version"] == 1 and "next_run_at" not in env.state("j1")
        message = env.queue.sent[0]
        assert message.body["version"] == 1 and message.body["definition"]["job_id"] == "j1"
        assert message.delay_seconds == 60
        assert [e.correlation_id for e in env.telemetry.named("run.claimed")] == [head]


def test_a_job_every_ten_seconds_claims_its_heads_in_one_tick() -> None:
    """The claims of one job chain in memory: each head a claim makes is claimed in the same tick
    while it is due in the lookahead (90 s)."""
    with build("memory", successor=True) as env:
        change(env, job("fast", "rate(10 seconds)"))
        result = env.trigger().tick("t")
        assert result.claimed == 9  # T0+10 s .. T0+90 s
        assert sent_ids(env) == [key("fast", T0 + s * SECOND) for s in range(10, 100, 10)]
        assert head_of(env, "fast") is not None and head_of(env, "fast")["scheduled_at"] == T0 + 100 * SECOND  # type: ignore[index]
        assert env.trigger().tick("again").claimed == 0
        assert len(env.queue.sent) == 9


def test_a_retried_tick_sends_again_only_its_own_claim() -> None:
    with build("memory", successor=True) as env:
        change(env, job("a"))
        ours = trigger_on(env, env.store, claimer_id="x")
        assert ours.tick("t1").claimed == 1
        change(env, job("b"))
        assert trigger_on(env, env.store, claimer_id="y").tick("y1").claimed == 1  # b, not a
        assert sent_ids(env) == [key("a", T0 + MINUTE), key("b", T0 + MINUTE)]
        retried = ours.tick("t1")  # the same tick again (a lost response, a retried invocation)
        assert retried.claimed == 1 and retried.conflicts == 0
        assert sent_ids(env)[2:] == [key("a", T0 + MINUTE)]  # its own claim, not y's


@pytest.mark.parametrize("kind", KINDS)
def test_two_triggers_racing_claim_a_head_once(kind: str) -> None:
    with build(kind, successor=True) as env:
        change(env, job("j1"))
        other = trigger_on(env, env.store, claimer_id="other")
        racing = trigger_on(env, Hooked(env.store, lambda: other.tick("o1")), claimer_id="late")
        late = racing.tick("l1")
        assert late.claimed == 0 and late.conflicts == 1
        assert sent_ids(env) == [key("j1", T0 + MINUTE)]  # once, by the winner
        lost = env.telemetry.named("claim.lost")
        assert [e.fields["to"] for e in lost] == ["taken"]


def test_a_claim_meeting_a_settles_record_sends_nothing() -> None:
    """HC9: the settle of the same overdue head wins the successor key; the claimer finds a record
    it did not make and sends nothing (N's fate is the settle's)."""
    with build("memory", successor=True) as env:
        change(env, job("j1"))
        head = key("j1", T0 + MINUTE)
        env.clock.set(T0 + MINUTE + 5 * SECOND)

        def settle() -> None:
            chunk = settle_head_ops(env.run(head), T0 + 10 * MINUTE, env.cfg)
            env.store.write(chunk.ops)

        result = trigger_on(env, Hooked(env.store, settle)).tick("t")
        assert result.claimed == 0 and result.conflicts == 1
        assert head not in sent_ids(env)
        assert [e.fields["to"] for e in env.telemetry.named("claim.lost")] == ["settled"]


def test_a_claim_meeting_a_changes_marker_sends_nothing() -> None:
    """HC10: a change (here an edit that keeps the timing) closes the head with a marker at its
    successor key after the claimer read it; the claim's put fails, and nothing is sent for it."""
    with build("memory", successor=True) as env:
        change(env, job("j1"))
        head = key("j1", T0 + MINUTE)
        edit = Hooked(env.store, lambda: change(env, job("j1", payload={"v": 2})), after_table=JOBS)
        result = trigger_on(env, edit).tick("t")
        assert head not in sent_ids(env)
        assert result.conflicts == 1
        assert [e.fields["to"] for e in env.telemetry.named("claim.lost")] == ["closed"]
        # The change's new head (epoch 2, the new digest) is claimed by the next tick.
        assert env.trigger().tick("t2").claimed == 1
        assert sent_ids(env) == [key("j1", T0 + MINUTE, 2)]


def test_an_overdue_head_is_the_detectors_and_a_late_one_within_grace_is_claimed() -> None:
    """As today's trigger: past its grace, the head's fate is the detector's settle (under its
    misfire policy), so the trigger leaves it; within its grace it is claimed late."""
    with build("memory", successor=True) as env:
        change(env, job("overdue", misfire={"grace_seconds": 30}))
        change(env, job("late", misfire={"grace_seconds": 120}))
        env.clock.set(T0 + 2 * MINUTE - SECOND)  # both heads (T0 + 1 min) 59 s late
        result = env.trigger().tick("t")
        late = [key("late", T0 + m * MINUTE) for m in (1, 2, 3)]  # then chained in the lookahead
        assert result.claimed == 3 and sent_ids(env) == late
        assert head_of(env, "overdue")["run_id"] == key("overdue", T0 + MINUTE)  # type: ignore[index]


def test_a_head_whose_digest_is_not_the_job_items_is_changed_inline_and_its_new_head_claimed() -> None:
    """HC10: a claim sends the definition it loaded only when its digest is the head's. A job item
    edited and not yet applied (a lagging stream) is applied inline, as today's trigger does: the
    registrar's change closes the head and makes one with the new digest, claimed in this tick."""
    with build("memory", successor=True) as env:
        change(env, job("j1"))
        change(env, job("j2"))
        put_job(env, job("j1", payload={"edited": True}))  # not applied yet
        result = env.trigger().tick("t")
        assert (result.claimed, result.deferred) == (2, 0)
        assert sorted(sent_ids(env)) == [key("j1", T0 + MINUTE, 2), key("j2", T0 + MINUTE)]
        sent = {m.body["run_id"]: m.body for m in env.queue.sent}
        assert sent[key("j1", T0 + MINUTE, 2)]["definition"]["payload"] == '{"edited":true}'
        assert env.run(key("j1", T0 + MINUTE))["status"] == "cancelled"  # the change closed it


def test_a_head_whose_job_item_went_invalid_is_skipped_with_a_reason() -> None:
    """The inline change of an invalid item makes no head: the old head is skipped, counted and
    logged, and the other jobs are claimed."""
    with build("memory", successor=True) as env:
        change(env, job("j1"))
        change(env, job("j2"))
        broken = {**job("j1").to_item(), "schedule": "every tuesday-ish"}
        env.store.write([Put(JOBS, broken, condition=(), label="person puts an invalid job")])
        result = env.trigger().tick("t")
        assert (result.claimed, result.deferred) == (1, 1)
        assert sent_ids(env) == [key("j2", T0 + MINUTE)]
        assert [e.fields["reason"] for e in env.telemetry.named("claim.deferred")] == [
            "job item gone or invalid"
        ]


def test_one_heads_error_never_stops_the_tick() -> None:
    with build("memory", successor=True) as env:
        change(env, job("bad"))
        change(env, job("good"))
        broken = env.run(key("bad", T0 + MINUTE))
        broken["next_key"] = key("bad", T0 + 7 * MINUTE)  # not its timing's next occurrence
        env.store.write([Put(RUNS, broken, condition=(), label="corrupt head")])
        result = env.trigger().tick("t")
        assert (result.claimed, result.job_errors) == (1, 1)
        assert sent_ids(env) == [key("good", T0 + MINUTE)]
        assert [e.correlation_id for e in env.telemetry.named("job.error")] == ["bad"]


def test_the_claim_that_ends_a_life_finishes_the_state() -> None:
    """HC5: the claim of a ``max_runs`` job's last head puts its end marker, and the trigger follows
    it with the finish write: the state reads ``finished`` with the life's count."""
    with build("memory", successor=True) as env:
        change(env, job("twice", "rate(10 seconds)", max_runs=2))
        result = env.trigger().tick("t")
        assert result.claimed == 2
        assert sent_ids(env) == [key("twice", T0 + 10 * SECOND), key("twice", T0 + 20 * SECOND)]
        state = env.state("twice")
        assert state["status"] == "finished" and state["runs_claimed"] == 2
        assert [e.fields["actor"] for e in env.telemetry.named("job.finished")] == ["trigger"]


# --- the migration ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_legacy_state_met_with_the_switch_on_is_converted_and_its_head_claimed(kind: str) -> None:
    with build(kind, successor=True) as env:
        seed_active(env, job("old"), T0 + MINUTE)
        result = env.trigger().tick("t")
        state = env.state("old")
        assert "next_run_at" not in state and state["epoch"] == 2
        head = key("old", T0 + MINUTE, 2)
        assert result.claimed == 1 and sent_ids(env) == [head]
        assert env.run(key("old", T0 + 2 * MINUTE, 2))["after_run_id"] == head
        assert [e.correlation_id for e in env.telemetry.named("job.converted")] == ["old"]
        assert env.trigger().tick("t2").claimed == 0


def test_with_the_switch_off_the_tick_is_todays() -> None:
    """No ``due`` query, no conversion: a legacy state is claimed by today's transaction."""
    with build("memory", successor=True) as env:
        current = env.store.get(STATE, dict(BOOKKEEPING_KEY))
        env.store.write([bookkeeping_op(current, {}, (CLAIM_SHAPE_ATTRIBUTE,), env.clock.now_ms())])
        seed_active(env, job("old"), T0 + MINUTE)
        hooked = Hooked(env.store, lambda: None)
        result = trigger_on(env, hooked).tick("t")
        assert result.claimed == 1 and hooked.queries == ["next-run", "next-run"]
        assert env.state("old")["next_run_at"] == T0 + 2 * MINUTE
        assert sent_ids(env) == [run_id_for("old", T0 + MINUTE)]


# --- the registrar's first claim (HC12) ------------------------------------------------------------


def test_claim_now_claims_a_successor_jobs_head() -> None:
    with build("memory", successor=True) as env:
        change(env, job("j1", "rate(20 seconds)"))
        result = env.trigger().claim_now("j1", "registrar")
        assert result.claimed == 4  # T0+20 s .. T0+80 s, as a tick would
        assert sent_ids(env) == [key("j1", T0 + s * SECOND) for s in (20, 40, 60, 80)]
        assert env.trigger().claim_now("j1", "registrar").claimed == 0


# --- what a claim costs ------------------------------------------------------------------------------


def test_what_a_successor_claim_costs_with_due_and_lease_both_present() -> None:
    """The figure: one put of the next head, 1 unit for the item, 1 for its ``due`` entry and 1 for
    its ``lease`` entry (the head has ``check_at`` and ``lease_shard``, so today's KEYS_ONLY
    ``lease`` index holds it too until the plan's deploy drops it)."""
    store = MeteringStore(extra_indexes=("due",))
    cfg = SchedulerConfig(shard_count=2)
    with build("memory", cfg=cfg, successor=True) as env:
        env.store = store
        store.write([bookkeeping_op(None, {CLAIM_SHAPE_ATTRIBUTE: "successor"}, (), T0)])
        change(env, job("j1"))
        store.write_units.clear()
        store.by_label.clear()
        before = store.read_units
        trigger = Trigger(
            store, env.queue, MemoryTelemetry(), env.clock, cfg, parallel_queries=False, read_claim_shape=True
        )
        assert trigger.tick("t").claimed == 1
        assert dict(store.by_label) == {"claim head": 3}
        assert dict(store.write_units) == {"runs": 1, "runs/due": 1, "runs/lease": 1}
        # Reads of a tick that claims one run: the switch's strongly consistent read (1), both
        # shards' next-run and due pages (0.5 each, the minimum), the successor's eventually
        # consistent read (0.5) and the job item's strongly consistent one (1).
        assert store.read_units - before == pytest.approx(1 + 4 * 0.5 + 0.5 + 1)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("written_s", "now_s"), [(30, 5), (5, 30)], ids=["lease-lowered", "lease-raised"])
def test_a_head_written_under_another_dispatch_lease_is_claimed_before_its_instant(
    kind: str, written_s: int, now_s: int
) -> None:
    """HC7: a head's ``check_at`` is its instant plus the dispatch lease it was written under, and
    no write re-keys it when ``DispatchLeaseSeconds`` changes. The trigger finds it by its instant,
    not by the stack's delay now, and the claim heads the next occurrence with the new delay."""
    with build(kind, cfg=default_cfg(dispatch_lease_seconds=written_s), successor=True) as env:
        head = change(env, job("j1", "rate(5 minutes)")).new_head
        assert head is not None
        at = int(head["scheduled_at"])
        assert head["check_at"] == at + written_s * SECOND
        env.cfg = default_cfg(dispatch_lease_seconds=now_s)  # the stack's parameter changed
        env.clock.set(at - 60 * SECOND)  # due within the 90 s lookahead
        assert env.trigger().tick("t").claimed == 1
        assert sent_ids(env) == [head["run_id"]]
        new_head = head_of(env, "j1")
        assert new_head is not None and new_head["run_id"] == head["next_key"]
        assert new_head["check_at"] == int(new_head["scheduled_at"]) + now_s * SECOND
