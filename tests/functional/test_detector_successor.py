"""The miss detector with the migration switch on (issue 37; build plan HC7, HC8, HC9, HC13): one
sweep of the ``due`` index settles unclaimed heads past their grace under each misfire policy,
redispatches a claimed run whose message was lost (never before its dispatch lease and the skew
allowance), rechecks a claim made late, leaves a head a change closed, recovers a worker that
started and died as today, settles a long outage in chunks within a transaction's 100 items, and
never reads ``lease`` (deploy 2 deletes it). Heads are made by the change transaction's first
registration and claimed by the claim's put, as the registrar and the trigger will."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from harness import MINUTE, T0, Env, build, default_cfg, job
from jobsched.core.errors import Throttled
from jobsched.core.head import head_check_at, is_head, is_unstarted_occurrence, next_key
from jobsched.core.head_change import HeadChangePlan, plan_head_change
from jobsched.core.job import JobDefinition, Misfire, MisfirePolicy, OverlapPolicy
from jobsched.core.limits import DYNAMODB_MAX_TRANSACTION_ITEMS
from jobsched.core.run import RunMessage, run_id_for
from jobsched.core.timing import start_at_ms
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY
from jobsched.core.transitions.head_change import head_change_ops
from jobsched.core.transitions.head_claim import ClaimRace, after_failed_claim, claim_head_op
from jobsched.core.transitions.head_settle import HEAD_SETTLE_CHUNK
from jobsched.core.writes import JOBS, RUNS, Item, Put
from jobsched.ports import IndexName, Page, Store
from jobsched.services.head_settler import HeadSettler
from jobsched.services.registrar import Registrar
from jobsched.services.worker import Started

SECOND = 1_000
INVOCATION_MS = 60_000
EVERY_MS = 10_000


@pytest.fixture(params=["memory", "dynamodb"])
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    with build(request.param, successor=True) as built:
        yield built


@pytest.fixture
def mem() -> Iterator[Env]:
    with build("memory", successor=True) as built:
        yield built


# --- set-up: heads as the registrar's first registration writes them, claims as the trigger's -------


def register(env: Env, definition: JobDefinition) -> Item:
    """The job item and its first registration (state and head at epoch 1, in one transaction)."""
    digest = definition.definition_hash()
    item = {**definition.to_item(), "status": "active", "def_hash": digest}
    env.store.write([Put(JOBS, item, condition=(), label="person puts job")])
    now = env.clock.now_ms()
    plan = plan_head_change(definition.job_id, None, None, definition, digest, now, env.cfg)
    assert isinstance(plan, HeadChangePlan) and plan.new_head is not None
    env.store.write(head_change_ops(plan, now, env.cfg))
    return plan.new_head


def minutely(job_id: str = "j1", policy: MisfirePolicy = MisfirePolicy.SKIP, **fields: Any) -> JobDefinition:
    misfire = Misfire(policy=policy, max_catchup=fields.pop("max_catchup", 10))
    return job(job_id, "rate(1 minute)", misfire=misfire, overlap=OverlapPolicy.ALLOW, **fields)


def claim(env: Env, head: Item, claimer: str = "tick-1") -> None:
    env.store.write([claim_head_op(head, env.clock.now_ms(), claimer, env.cfg)])


def items_of(env: Env, job_id: str) -> list[Item]:
    return sorted(env.runs_of(job_id), key=lambda r: (r["scheduled_at"], r["run_id"]))


def the_head(env: Env, job_id: str) -> Item:
    items = {str(r["run_id"]): r for r in items_of(env, job_id)}
    heads = [r for r in items.values() if is_head(r, items.get(next_key(r)) if "next_key" in r else None)]
    assert len(heads) == 1, heads
    return heads[0]


def sent_ids(env: Env) -> list[str]:
    return [str(m.body["run_id"]) for m in env.queue.sent]


def sleeper(env: Env, slept: list[int]) -> Callable[[int], None]:
    def sleep(ms: int) -> None:
        slept.append(ms)
        env.clock.advance(ms)

    return sleep


# --- HC7: an unclaimed head past its grace is settled under the misfire policy ----------------------


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # T0+1 .. T0+9 are past the 60 s grace at T0+11; T0+10 and T0+11 run late within it.
        (MisfirePolicy.SKIP, ["missed"] * 9),
        (MisfirePolicy.RUN_ONCE, ["missed"] * 8 + ["scheduled"]),
        (MisfirePolicy.RUN_ALL, ["scheduled"] * 9),
    ],
)
def test_an_unclaimed_head_past_its_grace_is_settled_under_its_misfire_policy(
    env: Env, policy: MisfirePolicy, expected: list[str]
) -> None:
    first = register(env, minutely(policy=policy))
    assert first["scheduled_at"] == T0 + MINUTE
    env.clock.set(T0 + 11 * MINUTE)  # the trigger was down: nothing claimed
    result = env.detector().run("d")
    items = items_of(env, "j1")
    decided = [r for r in items if r["scheduled_at"] <= T0 + 11 * MINUTE]
    assert [r["scheduled_at"] for r in decided] == [T0 + i * MINUTE for i in range(1, 12)]
    assert [r["status"] for r in decided[:9]] == expected
    assert [(r["status"], r["kind"]) for r in decided[9:]] == [("scheduled", "scheduled")] * 2  # late
    runs = [r for r in decided if r["status"] == "scheduled"]
    assert sorted(sent_ids(env)) == sorted(r["run_id"] for r in runs)  # each sent once
    assert result.missed_recorded == expected.count("missed") and result.catchups_started == len(runs)
    assert result.jobs_caught_up == 1
    # A head is left at the first occurrence after now, for the trigger.
    head = the_head(env, "j1")
    assert head["scheduled_at"] == T0 + 12 * MINUTE and head["through"] == T0 + 11 * MINUTE
    assert env.detector().run("again").missed_recorded == 0 and len(env.queue.sent) == len(runs)
    # The runs' messages start them (the worker accepts a ``scheduled`` run).
    env.registry.add("t", lambda _ctx: {"ok": True})
    outcomes = env.drain(env.worker())
    assert len(outcomes) == len(runs)
    assert all(env.run(r["run_id"])["status"] == "succeeded" for r in runs)


def test_a_head_within_its_grace_is_left_to_the_trigger(mem: Env) -> None:
    head = register(mem, minutely())
    mem.clock.set(head["scheduled_at"] + 59 * SECOND)  # its check came, its grace has not passed
    assert (
        head_check_at(head["scheduled_at"], mem.cfg) <= mem.clock.now_ms() - mem.cfg.clock_skew_allowance_ms
    )
    result = mem.detector().run("d")
    assert result.items == 1 and result.missed_recorded == 0 and mem.queue.sent == []
    assert mem.run(head["run_id"]) == head


# --- lost messages: redispatched once after the dispatch lease and the skew, never before ------------


def test_a_claimed_run_whose_message_was_lost_is_redispatched_once_after_its_lease(env: Env) -> None:
    head = register(env, minutely())
    env.clock.set(head["scheduled_at"] - 30 * SECOND)
    claim(env, head)  # and the trigger died before sending it
    lapse = head["scheduled_at"] + env.cfg.dispatch_lease_seconds * SECOND + env.cfg.clock_skew_allowance_ms
    env.clock.set(lapse - 1)
    assert env.detector().run("early").leases_recovered == 0
    assert env.queue.sent == [] and env.run(head["run_id"])["version"] == 1
    env.clock.set(lapse)
    result = env.detector().run("on time")
    assert result.leases_recovered == 1 and sent_ids(env) == [head["run_id"]]
    run = env.run(head["run_id"])
    assert (run["status"], run["version"], run["head_version"], run["recoveries"]) == ("scheduled", 2, 2, 1)
    assert env.queue.sent[0].body["version"] == 2  # the new token: a stale message cannot start it
    assert env.detector().run("again").leases_recovered == 0 and len(env.queue.sent) == 1
    env.registry.add("t", lambda _ctx: {"ok": True})
    env.drain(env.worker())
    assert env.run(head["run_id"])["status"] == "succeeded"


def test_a_sweep_wakes_for_a_lost_dispatch_the_moment_it_lapses(mem: Env) -> None:
    head = register(mem, minutely())
    mem.clock.set(head["scheduled_at"] - 10 * SECOND)
    claim(mem, head)
    slept: list[int] = []
    mem.detector().sweep("inv", mem.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleeper(mem, slept))
    lapse = head_check_at(head["scheduled_at"], mem.cfg) + mem.cfg.clock_skew_allowance_ms
    assert mem.run(head["run_id"])["recovered_at"] == lapse + 1
    assert sent_ids(mem) == [head["run_id"]]


def test_a_claim_made_late_is_rechecked_once_and_redispatched_only_after_its_own_lease(mem: Env) -> None:
    """HC8: the trigger behind, within grace: the claim's time, not the head's check, starts the
    dispatch lease."""
    head = register(mem, minutely())
    claimed_at = head["scheduled_at"] + 40 * SECOND  # after the head's check (instant + 30 s)
    mem.clock.set(claimed_at)
    claim(mem, head)
    lapse = claimed_at + mem.cfg.dispatch_lease_seconds * SECOND
    mem.clock.set(claimed_at + 5 * SECOND)
    result = mem.detector().run("late claim")
    assert result.leases_rechecked == 1 and mem.queue.sent == []
    assert mem.run(head["run_id"])["check_at"] == lapse and mem.run(head["run_id"])["version"] == 1
    mem.clock.set(lapse + mem.cfg.clock_skew_allowance_ms - 1)
    assert mem.detector().run("still early").items == 0 and mem.queue.sent == []
    mem.clock.set(lapse + mem.cfg.clock_skew_allowance_ms)
    assert mem.detector().run("lapsed").leases_recovered == 1 and sent_ids(mem) == [head["run_id"]]


def test_a_claimed_run_in_a_start_window_is_not_redispatched_before_its_start(mem: Env) -> None:
    """The start window (``jitter_seconds``) delays the message: the run's definition is read and
    its dispatch lease counts from its start."""
    head = register(mem, minutely(jitter_seconds=50))
    mem.clock.set(head["scheduled_at"] - 30 * SECOND)
    claim(mem, head)
    starts_at = start_at_ms(head["run_id"], head["scheduled_at"], minutely(jitter_seconds=50).to_item())
    assert starts_at > head["scheduled_at"]  # this run id's place in its window
    lapse = starts_at + mem.cfg.dispatch_lease_seconds * SECOND
    mem.clock.set(head_check_at(head["scheduled_at"], mem.cfg) + mem.cfg.clock_skew_allowance_ms)
    result = mem.detector().run("at the check")
    assert result.leases_recovered == 0 and result.leases_rechecked == 1 and mem.queue.sent == []
    assert mem.run(head["run_id"])["check_at"] == lapse
    mem.clock.set(lapse + mem.cfg.clock_skew_allowance_ms)
    assert mem.detector().run("lapsed").leases_recovered == 1 and sent_ids(mem) == [head["run_id"]]


# --- a worker that started and died holding the lock: recovered within a lease plus the skew --------


def test_a_worker_that_started_and_died_is_recovered_within_a_lease_plus_the_skew(mem: Env) -> None:
    head = register(mem, minutely())
    mem.clock.set(head["scheduled_at"] - 30 * SECOND)
    claim(mem, head)
    mem.clock.set(head["scheduled_at"] + 5 * SECOND)  # started a little late: its lease ends after the check
    message = RunMessage.from_run_item({**mem.run(head["run_id"]), "definition": minutely().to_item()})
    started = mem.worker("dies").begin(message, mem.clock.now_ms() + 900_000)
    assert isinstance(started, Started)  # and the worker dies holding its lease
    lease = mem.run(head["run_id"])["lease_expires_at"]
    slept: list[int] = []
    result = mem.detector().sweep("watch", mem.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleeper(mem, slept))
    recovered = mem.telemetry.named("lease.recovered")[0].fields
    assert result.leases_rechecked >= 1  # its check (instant + 30 s) came before its lease lapsed
    assert (recovered["was"], recovered["attempt"], recovered["lease_expired_at"]) == ("running", 2, lease)
    # Recovered 1 ms after its lease plus the skew allowance: the guarantee is unchanged.
    assert recovered["recovery_latency_ms"] == mem.cfg.clock_skew_allowance_ms + 1
    assert sent_ids(mem)[0] == head["run_id"] and mem.run(head["run_id"])["status"] == "pending"


# --- HC7 with short leases: the head's check follows DispatchLeaseSeconds ----------------------------


@pytest.fixture(params=["memory", "dynamodb"])
def short(request: pytest.FixtureRequest) -> Iterator[Env]:
    """A successor stack with DispatchLeaseSeconds 5 and LeaseSeconds 5 (the bench's settings)."""
    cfg = default_cfg(dispatch_lease_seconds=5, lease_seconds=5, heartbeat_seconds=1)
    with build(request.param, cfg=cfg, successor=True) as built:
        yield built


@pytest.mark.parametrize("starts", [False, True], ids=["dies-before-its-start-write", "dies-after-it"])
def test_a_worker_that_dies_at_its_start_is_recovered_within_a_short_lease_plus_the_skew(
    short: Env, starts: bool
) -> None:
    """Issue 37's guarantee on a successor stack whose leases are below 30 s: the head keeps its
    ``due`` entry through its claim and start, so its ``check_at`` must be its instant plus the
    dispatch lease (``head_check_delay_ms``), not a fixed 30 s, or the detector first meets the
    dead run 30 s after its instant. A worker that took the message and died before its start
    write leaves the run ``scheduled`` (redispatched); one that died after it leaves it
    ``running`` with a lease (recovered as today)."""
    head = register(short, minutely())
    at = head["scheduled_at"]
    short.clock.set(at - 30 * SECOND)
    claim(short, head)
    short.clock.set(at)  # its message arrives at its instant
    if starts:
        message = RunMessage.from_run_item({**short.run(head["run_id"]), "definition": minutely().to_item()})
        assert isinstance(short.worker("dies").begin(message, short.clock.now_ms() + 900_000), Started)
    bound = at + max(short.cfg.lease_seconds, short.cfg.dispatch_lease_seconds) * SECOND
    bound += short.cfg.clock_skew_allowance_ms
    slept: list[int] = []
    short.detector().sweep("watch", short.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleeper(short, slept))
    first = short.telemetry.named("lease.recovered")[0].fields
    recovered_at = first["lease_expired_at"] + first["recovery_latency_ms"]
    assert first["was"] == ("running" if starts else "scheduled")
    assert at < recovered_at <= bound + 1  # woken 1 ms after the lapse (the sweep's wake)
    assert sent_ids(short)[0] == head["run_id"]


# --- HC9: a late claim against the settle of the same head: exactly one of them --------------------


class ClaimsFirst:
    """The store, through which a late claim of the head lands just before the settle's chunk."""

    def __init__(self, env: Env, head: Item) -> None:
        self.env, self.store, self.head, self.claimed = env, env.store, head, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def write(self, ops: Sequence[Any]) -> None:
        if not self.claimed and any(str(op.label).startswith("settle head") for op in ops):
            self.claimed = True
            self.store.write([claim_head_op(self.head, self.env.clock.now_ms(), "late-tick", self.env.cfg)])
        self.store.write(ops)


def test_a_late_claim_landing_before_the_settle_wins_and_the_settle_writes_nothing(mem: Env) -> None:
    head = register(mem, minutely(policy=MisfirePolicy.RUN_ALL))
    mem.clock.set(T0 + 5 * MINUTE)
    mem.store = ClaimsFirst(mem, head)  # type: ignore[assignment]
    result = mem.detector().run("d")
    assert result.missed_recorded == 0 and result.catchups_started == 0 and mem.queue.sent == []
    assert [e.fields["failed"] for e in mem.telemetry.named("settle.lost")] == [
        "settle record " + next_key(head)
    ]
    n, successor = mem.run(head["run_id"]), mem.run(next_key(head))
    assert (n["status"], n["version"]) == ("scheduled", 1)  # the claim's: it runs as claimed
    assert successor["claimed_by"] == "late-tick" and is_head(successor, None)


def test_a_settle_landing_before_a_late_claim_makes_the_claim_send_nothing(mem: Env) -> None:
    head = register(mem, minutely())
    mem.clock.set(T0 + 5 * MINUTE)
    mem.detector().run("d")
    from jobsched.core.errors import ConditionFailed

    with pytest.raises(ConditionFailed):
        claim(mem, head, "late-tick")
    successor = mem.run(next_key(head))
    assert after_failed_claim(head, successor, "late-tick") is ClaimRace.SETTLED
    assert mem.run(head["run_id"])["status"] == "missed"


# --- a head a change closed is left ------------------------------------------------------------------


def test_a_head_whose_successor_key_holds_a_closure_marker_is_left(mem: Env) -> None:
    """As a stale read of a head a change closed finds it: the change cancels it, not the detector."""
    head = register(mem, minutely())
    marker = {"job_id": "j1", "run_id": next_key(head), "status": "closed", "epoch": 1, "closes_epoch": 1}
    mem.store.write([Put(RUNS, marker, condition=(), label="a change's marker")])
    mem.clock.set(T0 + 10 * MINUTE)
    result = mem.detector().run("d")
    assert result.items == 1 and result.missed_recorded == 0 and result.leases_recovered == 0
    assert mem.run(head["run_id"]) == head and mem.queue.sent == []


# --- a long outage: chunks within a transaction's 100 items -------------------------------------------


class TransactionSizes:
    def __init__(self, store: Store) -> None:
        self.store, self.sizes = store, []  # type: list[int]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def write(self, ops: Sequence[Any]) -> None:
        self.sizes.append(len(ops))
        self.store.write(ops)


@pytest.mark.parametrize(("kind", "minutes"), [("memory", 6 * 60), ("dynamodb", HEAD_SETTLE_CHUNK + 5)])
def test_a_long_outage_is_settled_in_chunks_within_100_items_a_transaction(kind: str, minutes: int) -> None:
    with build(kind, successor=True) as env:
        register(env, minutely(policy=MisfirePolicy.RUN_ONCE))
        env.clock.set(T0 + minutes * MINUTE)
        sizes = TransactionSizes(env.store)
        env.store = sizes  # type: ignore[assignment]
        result = env.detector().run("d")
        assert max(sizes.sizes) <= DYNAMODB_MAX_TRANSACTION_ITEMS and len(sizes.sizes) >= 2
        items = items_of(env, "j1")
        instants = [r["scheduled_at"] for r in items]
        assert instants == [T0 + i * MINUTE for i in range(1, minutes + 2)]  # one item each, no gap
        head = the_head(env, "j1")
        assert head["scheduled_at"] == T0 + (minutes + 1) * MINUTE
        runs = [r for r in items if r["status"] == "scheduled" and r["run_id"] != head["run_id"]]
        # run_once: one catch-up for the whole outage (not one a chunk), and the late ones.
        assert [r["kind"] for r in runs] == ["catchup", "scheduled", "scheduled"]
        assert result.missed_recorded == minutes - 3 and len(env.queue.sent) == 3


def test_an_outage_larger_than_the_budget_is_settled_over_several_invocations(mem: Env) -> None:
    mem.cfg = default_cfg(detector_max_items=HEAD_SETTLE_CHUNK)
    register(mem, minutely())
    mem.clock.set(T0 + 300 * MINUTE)
    first = mem.detector().run("d1")
    assert first.stopped_early and first.backlog == 1 and first.missed_recorded == HEAD_SETTLE_CHUNK
    later = [mem.detector().run(f"d{i}") for i in range(2, 6)]
    assert sum(r.missed_recorded for r in later) + first.missed_recorded == 298
    assert the_head(mem, "j1")["scheduled_at"] == T0 + 301 * MINUTE
    assert len([r for r in items_of(mem, "j1") if r["status"] == "missed"]) == 298


def test_an_overdue_backlog_above_the_threshold_degrades_run_all_to_run_once(mem: Env) -> None:
    mem.cfg = default_cfg(detector_degrade_backlog=1)
    for job_id in ("a", "b"):
        register(mem, minutely(job_id, policy=MisfirePolicy.RUN_ALL))
    mem.clock.set(T0 + 6 * MINUTE)
    result = mem.detector().run("d")
    assert result.degraded and mem.telemetry.named("detector.degraded")
    for job_id in ("a", "b"):
        caught_up = [
            r for r in items_of(mem, job_id) if r["kind"] == "catchup" and r["status"] == "scheduled"
        ]
        assert len(caught_up) == 1 and caught_up[0]["reason"].startswith("run_all degraded to run_once")


# --- isolation, the registrar's job, the switch --------------------------------------------------------


def test_one_broken_head_does_not_stop_the_others(mem: Env) -> None:
    broken = register(mem, minutely("broken"))
    mem.store.write([Put(RUNS, {**broken, "timing": {"kind": "nonsense"}}, condition=(), label="break")])
    register(mem, minutely("fine"))
    mem.clock.set(T0 + 5 * MINUTE)
    result = mem.detector().run("d")
    assert result.job_errors == 1 and [e.correlation_id for e in mem.telemetry.named("job.error")] == [
        broken["run_id"]
    ]
    assert the_head(mem, "fine")["scheduled_at"] == T0 + 6 * MINUTE


class RecordingRegistrar(Registrar):
    def __init__(self, env: Env) -> None:
        super().__init__(env.store, env.telemetry, env.clock, env.cfg, env.queue, report=False)
        self.applied: list[str] = []

    def apply(self, job_id: str, *args: Any, **kwargs: Any) -> Any:
        self.applied.append(job_id)
        return None


def test_a_head_of_a_job_changed_since_is_left_to_the_registrar(mem: Env) -> None:
    """As today's ``load_job``: the change settles the head first, with a pause's reason if it is one."""
    head = register(mem, minutely())
    changed = {**minutely().to_item(), "status": "paused", "def_hash": "other"}
    mem.store.write([Put(JOBS, {**changed, "payload": {"edited": True}}, condition=(), label="person edits")])
    mem.clock.set(T0 + 5 * MINUTE)
    registrar = RecordingRegistrar(mem)
    result = mem.detector(registrar=registrar).run("d")
    assert "j1" in registrar.applied and result.missed_recorded == 0
    assert mem.run(head["run_id"]) == head


class QueriesRecorded:
    def __init__(self, store: Store) -> None:
        self.store, self.indexes = store, []  # type: list[str]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def query(self, index: IndexName, *args: Any, **kwargs: Any) -> Page:
        self.indexes.append(index)
        return self.store.query(index, *args, **kwargs)


def test_with_the_switch_on_the_detector_reads_due_and_never_lease(mem: Env) -> None:
    """Deploy 2 deletes ``lease``: every lease is in ``due``, so one sweep judges each run once.
    A legacy run's lapsed lease (running, claimed before the switch) is recovered from ``due``."""
    from jobsched.core.run import RunKind
    from jobsched.core.transitions import new_run_item

    definition = minutely("legacy")
    mem.ops().register(definition)
    run = new_run_item(
        "legacy",
        run_id_for("legacy", T0),
        T0,
        definition.to_item(),
        definition.definition_hash(),
        RunKind.SCHEDULED,
        T0,
        mem.cfg,
    )
    run.update(status="running", version=2, owner="w/0", lease_expires_at=T0, check_at=T0)
    mem.store.write([Put(RUNS, run, condition=(), label="seed run")])
    register(mem, minutely())  # a head too, due later
    mem.clock.set(T0 + mem.cfg.clock_skew_allowance_ms + 1)
    recorded = QueriesRecorded(mem.store)
    mem.store = recorded  # type: ignore[assignment]
    result = mem.detector().sweep("inv", mem.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleeper(mem, []))
    assert "lease" not in recorded.indexes and "due" in recorded.indexes
    # Recovered once per lapse (its worker died, then no worker started the redispatch): never
    # twice for one lapse, as two indexes holding the same lease would make it.
    tokens = [e.fields["token"] for e in mem.telemetry.named("lease.recovered")]
    assert tokens == [3, 4] and result.leases_recovered == 2 and result.recovery_conflicts == 0


def test_with_the_switch_off_the_detector_reads_lease_as_today(mem: Env) -> None:
    from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE
    from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY, bookkeeping_op
    from jobsched.core.writes import STATE

    current = mem.store.get(STATE, dict(BOOKKEEPING_KEY))
    mem.store.write([bookkeeping_op(current, {}, (CLAIM_SHAPE_ATTRIBUTE,), mem.clock.now_ms())])
    recorded = QueriesRecorded(mem.store)
    mem.store = recorded  # type: ignore[assignment]
    mem.detector().run("d")
    assert "lease" in recorded.indexes and "due" not in recorded.indexes


# --- idle and wake read ``due`` -------------------------------------------------------------------------


def test_a_stack_whose_heads_are_due_after_the_next_invocation_returns_idle(mem: Env) -> None:
    register(mem, job("yearly", "rate(365 days)"))
    slept: list[int] = []
    result = mem.detector().sweep("idle", mem.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleeper(mem, slept))
    assert slept == [] and result.sweeps == 1


def test_a_head_due_before_the_next_invocation_keeps_the_detector_sweeping(mem: Env) -> None:
    register(mem, job("soon", "rate(2 minutes)"))
    slept: list[int] = []
    result = mem.detector().sweep("busy", mem.clock.now_ms() + INVOCATION_MS, EVERY_MS, sleeper(mem, slept))
    assert slept and result.sweeps > 1


# --- HC13: a head on a dropped shard ------------------------------------------------------------------


def test_a_head_on_a_dropped_shard_is_swept_and_keeps_the_shard_from_draining() -> None:
    with build("memory", cfg=default_cfg(shard_count=8), successor=True) as env:
        from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY
        from jobsched.core.writes import STATE

        heads = [register(env, minutely(f"j{i}")) for i in range(8)]
        high = [h for h in heads if h["lease_shard"] >= 2]
        assert high
        env.detector().run("records shard_high")  # the bookkeeping item records 8 shards
        env.cfg = default_cfg(shard_count=2)  # ShardCount lowered: shards 2..7 drain
        recorded = QueriesRecorded(env.store)
        env.store = recorded  # type: ignore[assignment]
        env.detector().run("heads not due")
        assert "lease" not in recorded.indexes  # the drain reads due: every lease and every head
        bookkeeping = env.store.get(STATE, dict(BOOKKEEPING_KEY))
        assert bookkeeping is not None and bookkeeping["shard_high"] == 8
        assert "drained_since" not in bookkeeping  # the heads there hold the dropped shards
        env.clock.set(T0 + 5 * MINUTE)
        env.detector().run("d")
        for h in high:  # settled on its dropped shard: its next head is on the shards queried
            assert env.run(h["run_id"])["status"] == "missed"
            job_id = h["job_id"]
            assert the_head(env, job_id)["lease_shard"] < 2
        bookkeeping = env.store.get(STATE, dict(BOOKKEEPING_KEY))
        assert bookkeeping is not None and bookkeeping["drained_since"] == T0 + 5 * MINUTE


# --- the registrar's settle before a change: every due occurrence missed with its reason --------------


def test_the_registrars_settle_records_every_due_occurrence_missed_with_the_stops_reason(mem: Env) -> None:
    head = register(mem, minutely(policy=MisfirePolicy.RUN_ALL))
    paused_at = T0 + 4 * MINUTE + 30 * SECOND
    mem.clock.set(T0 + 6 * MINUTE)
    settled = HeadSettler(mem.store, mem.telemetry, mem.cfg).settle(
        mem.run(head["run_id"]), mem.clock.now_ms(), lambda _: True, reason="job paused", until=paused_at
    )
    assert settled.complete and not settled.lost_race and settled.to_dispatch == []
    decided = [r for r in items_of(mem, "j1") if r["status"] == "missed"]
    assert [r["scheduled_at"] for r in decided] == [T0 + i * MINUTE for i in range(1, 5)]
    assert {r["reason"] for r in decided} == {"job paused"}
    assert settled.head is not None and settled.head["scheduled_at"] == T0 + 5 * MINUTE  # the change's
    assert is_unstarted_occurrence(mem.run(settled.head["run_id"]))


class SwitchUnread:
    """The store, through which the bookkeeping item (the switch) cannot be read: throttled."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def get(self, table: str, key: Item, consistent: bool = True) -> Item | None:
        if key == dict(BOOKKEEPING_KEY):
            raise Throttled("the bookkeeping item")
        return self.store.get(table, key, consistent)


def test_a_detector_that_could_not_read_the_switch_leaves_heads_alone(mem: Env) -> None:
    """It sweeps as today (``lease``), where every head is too: a head or claimed run met there
    is the due sweep's, not a run with a lease to recover (and no error)."""
    head = register(mem, minutely())
    mem.clock.set(T0 + 5 * MINUTE)
    mem.store = SwitchUnread(mem.store)  # type: ignore[assignment]
    result = mem.detector().run("d")
    assert result.items == 1 and result.job_errors == 0 and result.missed_recorded == 0
    assert mem.run(head["run_id"]) == head


def test_a_lease_only_wake_leaves_overdue_heads_to_the_full_sweep(mem: Env) -> None:
    head = register(mem, minutely())
    detector = mem.detector()
    detector.run("first")  # reads the switch
    mem.clock.set(T0 + 5 * MINUTE)
    woken = detector.run("wake", leases_only=True, reconcile=False)
    assert woken.missed_recorded == 0 and mem.run(head["run_id"]) == head
    assert detector.run("full", reconcile=False).missed_recorded == 3


class ThrottledAfter:
    """The store, whose transactions are throttled after the first ``allowed``."""

    def __init__(self, store: Store, allowed: int) -> None:
        self.store, self.allowed = store, allowed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def write(self, ops: Sequence[Any]) -> None:
        if self.allowed <= 0:
            raise Throttled("write")
        self.allowed -= 1
        self.store.write(ops)


def test_a_settle_throttled_between_chunks_is_taken_up_by_the_next_sweep(mem: Env) -> None:
    register(mem, minutely())
    mem.clock.set(T0 + 200 * MINUTE)
    store = mem.store
    mem.store = ThrottledAfter(store, 1)  # type: ignore[assignment]
    first = mem.detector().run("d1")
    assert first.missed_recorded == HEAD_SETTLE_CHUNK and first.backlog == 1 and first.stopped_early
    mem.store = store
    second = mem.detector().run("d2")
    assert first.missed_recorded + second.missed_recorded == 198
    assert the_head(mem, "j1")["scheduled_at"] == T0 + 201 * MINUTE
