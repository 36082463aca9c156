"""The operations API on a job of the successor claim (issue 37; services/head_operations.py):
the manual run, the backfill and the rerun of a missed record join the chain through the job's
head (HC3, HC11), its view reads the head (``show``, ``jobs``, ``describe``), and the worker adopts
a claimed run whose message carried an old version (HC3), never a ``pending`` one.

Heads are made as the successor registrar will make them (core/head_change.py
``plan_head_change`` + ``head_change_ops``) and claimed as the successor trigger will
(core/transitions/head_claim.py ``claim_head_op``), until those services land."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from harness import KINDS, MINUTE, T0, Counter, Env, build, job, switch_to_successor
from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE
from jobsched.core.head import is_end_marker
from jobsched.core.head_change import HeadChangePlan, plan_head_change
from jobsched.core.job import JobDefinition
from jobsched.core.run import RunKind, RunMessage, RunStatus, run_id_for, run_key
from jobsched.core.transitions import new_run_item
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY, bookkeeping_op
from jobsched.core.transitions.head_adhoc import NOT_SETTLED, BackfillRefused
from jobsched.core.transitions.head_change import head_change_ops
from jobsched.core.transitions.head_claim import claim_head_op, claimed_run_message
from jobsched.core.writes import JOBS, RUNS, STATE, Put, WriteOp
from jobsched.services.head_operations import head_of, occurrence_items
from jobsched.services.loaded_job import load_job
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import Outcome
from jobsched_tools.cli.cmd_describe import describe
from jobsched_tools.cli.cmd_jobs import _job_row, _show_job, _with_defaults
from jobsched_tools.ops.top import render, snapshot


def successor_job(env: Env, definition: JobDefinition) -> dict[str, Any]:
    """The job item and its first registration under the successor claim (epoch 1, its head at
    the first occurrence after now). Returns the head."""
    env.store.write([Put(JOBS, definition.to_item(), condition=(), label="person puts job")])
    plan = plan_head_change(
        definition.job_id,
        None,
        None,
        definition,
        definition.definition_hash(),
        env.clock.now_ms(),
        env.cfg,
    )
    assert isinstance(plan, HeadChangePlan)
    env.store.write(head_change_ops(plan, env.clock.now_ms(), env.cfg))
    return head(env, definition.job_id)


def head(env: Env, job_id: str = "j1") -> dict[str, Any]:
    found = head_of(occurrence_items(env.store, job_id))
    assert found is not None
    return found


def claim(env: Env, current: dict[str, Any], claimer: str = "t/1") -> dict[str, Any]:
    """The successor trigger's claim of ``current``: its successor put. Returns the new head."""
    put = claim_head_op(current, env.clock.now_ms(), claimer, env.cfg)
    env.store.write([put])
    return dict(put.item)


def message_of(env: Env, run: dict[str, Any]) -> RunMessage:
    definition = env.job_item(str(run["job_id"]))
    assert definition is not None
    return claimed_run_message(run, definition)


def run_ids(env: Env) -> list[str]:
    return [parse_run_message(m.body).run_id for m in env.queue.sent]


# --- the manual run --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_manual_run_relinks_the_head_and_runs_before_its_occurrence(kind: str) -> None:
    """M joins in front of the head: M takes the head's chain end, the head follows M. Then the
    head's claim sends N behind M, and both run, M first. Joined as today (the state's
    ``latest_run_id``), the head would still name the old chain end and N would not wait for M."""
    with build(kind, successor=True) as env:
        env.registry.add("t", Counter())
        first = successor_job(env, job())
        manual = env.ops().trigger("j1", "r1")
        relinked = env.run(str(first["run_id"]))
        assert env.run(manual)["status"] == RunStatus.PENDING.value
        assert relinked["after_run_id"] == manual
        assert int(relinked["version"]) == int(first["version"]) + 1
        assert "after_run_id" not in env.run(manual)  # the first run of its job
        assert run_ids(env) == [manual]
        env.clock.set(int(first["scheduled_at"]))
        claim(env, env.run(str(first["run_id"])))
        occurrence = message_of(env, env.run(str(first["run_id"])))
        assert occurrence.after_run_id == manual
        worker = env.worker()
        manual_message = parse_run_message(env.queue.sent[0].body)
        assert worker.process(manual_message, T0 + 10 * MINUTE) is Outcome.SUCCEEDED
        assert worker.process(occurrence, T0 + 10 * MINUTE) is Outcome.SUCCEEDED
        assert env.run(manual)["finished_at"] <= env.run(occurrence.run_id)["started_at"]


class ClaimBeforeRelink:
    """The environment's store, through which a trigger's claim of the head lands between the
    manual run's read of the head and its relink (the model's ``tick-manual``)."""

    def __init__(self, env: Env) -> None:
        self._env = env
        self._inner = env.store
        self.claimed: dict[str, Any] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def write(self, ops: list[WriteOp]) -> None:
        if self.claimed is None and any(op.label.startswith("relink head") for op in ops):
            self.claimed = dict(head(self._env))
            self._inner.write([claim_head_op(self.claimed, self._env.clock.now_ms(), "t/1", self._env.cfg)])
        self._inner.write(ops)


def test_a_manual_run_racing_a_claim_relinks_the_new_head() -> None:
    """The claim lands first: the relink's check at the head's successor key fails, the manual run
    reads the head again and relinks N+1, so M lies between N and N+1 (HC3)."""
    with build("memory", successor=True) as env:
        successor_job(env, job())
        racing = ClaimBeforeRelink(env)
        env.store = racing  # type: ignore[assignment]
        manual = env.ops().trigger("j1", "r1")
        env.store = racing._inner
        assert racing.claimed is not None
        claimed_id = str(racing.claimed["run_id"])
        assert env.run(manual)["after_run_id"] == claimed_id
        assert head(env)["after_run_id"] == manual
        assert head(env)["run_id"] == racing.claimed["next_key"]
        assert not manual.already_requested


def test_a_retried_request_sends_its_message_again_until_the_run_starts() -> None:
    """``adhoc.run_absent``: the retried request makes nothing twice, and sends the made run's
    message again (its first send may be what was lost); once the run started it sends nothing."""
    with build("memory", successor=True) as env:
        env.registry.add("t", Counter())
        successor_job(env, job())
        first = env.ops().trigger("j1", "r1")
        again = env.ops().trigger("j1", "r1")
        assert again == first and again.already_requested
        assert run_ids(env) == [first, first]
        assert head(env)["after_run_id"] == first  # relinked once
        assert int(head(env)["version"]) == 2
        env.drain(env.worker())
        env.ops().trigger("j1", "r1")
        assert run_ids(env) == [first, first]


def test_a_manual_run_of_a_finished_life_joins_the_end_markers_chain() -> None:
    """An at() job whose last claim wrote the end marker, the finish write not yet landed: the
    manual run finishes the state first (HC5), then joins the state's chain end."""
    with build("memory", successor=True) as env:
        first = successor_job(env, job(schedule="at(2026-12-01T00:05:00)"))
        env.clock.set(int(first["scheduled_at"]))
        marker = claim(env, first)
        assert is_end_marker(marker)
        assert env.ops().get("j1")["status"] == "finished"  # active, no head, end marker
        manual = env.ops().trigger("j1", "r1")
        assert env.state("j1")["status"] == "finished"
        assert env.run(manual)["after_run_id"] == first["run_id"]
        assert env.state("j1")["latest_run_id"] == manual


# --- backfill and rerun ----------------------------------------------------------------------


def claimed_twice(env: Env) -> dict[str, Any]:
    """A successor job registered at T0, claimed at T0+1 and T0+2: the head is at T0+3."""
    current = successor_job(env, job())
    for _ in range(2):
        env.clock.set(int(current["scheduled_at"]))
        current = claim(env, current)
    assert current["scheduled_at"] == T0 + 3 * MINUTE
    return current


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


@pytest.mark.parametrize("kind", KINDS)
def test_a_backfill_at_the_head_is_refused_and_writes_nothing(kind: str) -> None:
    """HC11: the range reaches the head's instant (not decided yet): refused with its clear
    reason before any instant of it is written, the earlier ones included."""
    with build(kind, successor=True) as env:
        claimed_twice(env)
        env.clock.set(T0 + 3 * MINUTE + 40_000)  # the head is overdue, not settled
        before = sorted(str(item["run_id"]) for item in occurrence_items(env.store, "j1"))
        with pytest.raises(BackfillRefused, match=NOT_SETTLED):
            env.ops().backfill("j1", at(T0 - 3 * MINUTE), at(T0 + 3 * MINUTE))
        assert sorted(str(item["run_id"]) for item in occurrence_items(env.store, "j1")) == before
        assert env.queue.sent == []


class SeveralHeadsOnce:
    """The environment's store, whose first two occurrence reads also show a second head: reads
    that overlapped a change's transaction (HC12: read-committed per item, not a snapshot)."""

    def __init__(self, env: Env) -> None:
        self._inner = env.store
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def occurrence_items(self, job_id: str, page_limit: int | None = None) -> list[dict[str, Any]]:
        items = self._inner.occurrence_items(job_id, page_limit)  # type: ignore[attr-defined]
        self.reads += 1
        if self.reads <= 2:  # the definition's read (``get``'s view), then the range's check
            (only,) = [item for item in items if item["run_id"] == head_of(items)["run_id"]]  # type: ignore[index]
            phantom = {**only, "run_id": f"{only['run_id']}0", "next_key": "j1@phantom"}
            items = [*items, phantom]
        return items


def test_a_backfill_whose_first_read_shows_two_heads_reads_again_before_writing() -> None:
    """HC12: no head is picked from a read showing two; the range is checked against the head a
    second read finds, so the refusal still comes before anything is written."""
    with build("memory", successor=True) as env:
        claimed_twice(env)
        env.clock.set(T0 + 3 * MINUTE + 40_000)
        before = sorted(str(item["run_id"]) for item in occurrence_items(env.store, "j1"))
        flaky = SeveralHeadsOnce(env)
        env.store = flaky  # type: ignore[assignment]
        with pytest.raises(BackfillRefused, match=NOT_SETTLED):
            env.ops().backfill("j1", at(T0 - 3 * MINUTE), at(T0 + 3 * MINUTE))
        env.store = flaky._inner
        assert flaky.reads >= 3
        assert sorted(str(item["run_id"]) for item in occurrence_items(env.store, "j1")) == before


@pytest.mark.parametrize("kind", KINDS)
def test_a_backfill_behind_the_head_joins_through_it(kind: str) -> None:
    """Instants behind the head get records in the head's epoch, linked in front of the head;
    the claimed run at T0+1 and T0+2 ran (or runs) already."""
    with build(kind, successor=True) as env:
        current = claimed_twice(env)
        env.clock.set(T0 + 3 * MINUTE - 10_000)
        done = env.ops().backfill("j1", at(T0 - 2 * MINUTE), at(T0 + 2 * MINUTE))
        epoch = int(current["epoch"])
        made = [run_id_for("j1", T0 + n * MINUTE, epoch) for n in (-1, 0)]
        assert done.created == made
        assert done.already_existed == [run_id_for("j1", T0 + n * MINUTE, epoch) for n in (1, 2)]
        assert env.run(made[0])["after_run_id"] == current["after_run_id"]  # the claimed T0+2
        assert env.run(made[1])["after_run_id"] == made[0]
        assert head(env)["run_id"] == current["run_id"]
        assert head(env)["after_run_id"] == made[1]
        assert run_ids(env) == made


def test_a_missed_record_is_rerun_through_the_head() -> None:
    """The rerun of a missed record behind the head (``rerun_ops``): the record becomes its run,
    same id, linked in front of the head; a second backfill leaves it alone."""
    with build("memory", successor=True) as env:
        current = claimed_twice(env)
        epoch = int(current["epoch"])
        missed_id = run_id_for("j1", T0 - MINUTE, epoch)
        missed = new_run_item(
            "j1",
            missed_id,
            T0 - MINUTE,
            None,
            str(current["def_hash"]),
            RunKind.CATCHUP,
            T0,
            env.cfg,
            RunStatus.MISSED,
        )
        env.store.write([Put(RUNS, missed, condition=(), label="a settle's missed record")])
        done = env.ops().backfill("j1", at(T0 - 2 * MINUTE), at(T0 - MINUTE))
        assert done.rerun == [missed_id] and done.outcomes == {missed_id: "rerun (was missed)"}
        assert env.run(missed_id)["status"] == RunStatus.PENDING.value
        assert env.run(missed_id)["after_run_id"] == current["after_run_id"]
        assert head(env)["after_run_id"] == missed_id
        again = env.ops().backfill("j1", at(T0 - 2 * MINUTE), at(T0 - MINUTE))
        assert again.already_existed == [missed_id]


# --- the job's view --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_get_describe_and_show_read_the_head(kind: str) -> None:
    """The position is the head's instant, the chain end its ``after_run_id``, the last scheduled
    its ``through``; ``describe``, ``show`` and ``jobs`` print the same."""
    with build(kind, successor=True) as env:
        current = claimed_twice(env)
        view = env.ops().get("j1")
        assert view["next_run_at"] == current["scheduled_at"] == T0 + 3 * MINUTE
        assert view["latest_run_id"] == current["after_run_id"]
        assert view["last_scheduled_at"] == T0 + 2 * MINUTE
        assert env.ops().list_jobs() == [view]
        described = describe(view, env.ops().runs("j1"), env.clock.now_ms(), 2)
        assert described["state"]["position"] == "2026-12-01T00:03:00Z"
        assert described["state"]["chain_end"] == current["after_run_id"]
        assert described["state"]["last_scheduled_at"] == "2026-12-01T00:02:00Z"
        assert described["next"][0]["instant"] == "2026-12-01T00:03:00Z"
        shown = _show_job(_with_defaults(view))
        assert "next_run_at: 2026-12-01 00:03:00 UTC" in shown
        assert f"latest_run_id: {current['after_run_id']}" in shown
        assert _job_row(view)[4] == "2026-12-01 00:03:00 UTC"


def test_top_shows_successor_heads_due_soon_or_behind_and_their_chains() -> None:
    """``jobsched top`` on successor jobs: heads from the ``due`` index (a claimed run is not shown
    as due), an overdue unclaimed head as behind, each job's chain from its head."""
    with build("memory", successor=True) as env:
        late = successor_job(env, job("j3"))  # its head at T0+1, never claimed
        current = claimed_twice(env)  # j1's head at T0+3, claimed runs at T0+1 and T0+2
        successor_job(env, job("j2"))  # registered at T0+2: its head at T0+3 too
        env.clock.set(T0 + 3 * MINUTE - 1000)
        assert late["scheduled_at"] < env.clock.now_ms()  # j3's head is past, unclaimed
        status = snapshot(env.store, env.cfg.shard_count, env.clock.now_ms())
        assert sorted(s["job_id"] for s in status.due_soon) == ["j1", "j2"]
        assert all(s["next_run_at"] == current["scheduled_at"] for s in status.due_soon)
        assert [s["job_id"] for s in status.behind] == ["j3"]
        chains = {job_item["job_id"]: [run["run_id"] for run in chain] for job_item, _, chain in status.jobs}
        assert chains["j1"] == [current["after_run_id"], run_id_for("j1", T0 + MINUTE, int(current["epoch"]))]
        assert "j1" in render(status)


def test_top_does_not_show_a_claimed_run_as_behind() -> None:
    """A past occurrence whose successor lies beyond the horizon: its claim is seen only by the
    GetItem of its successor key, and it is not behind."""
    with build("memory", successor=True) as env:
        first = successor_job(env, job(schedule="rate(15 minutes)"))
        env.clock.set(int(first["scheduled_at"]))
        claim(env, first)
        env.clock.set(int(first["scheduled_at"]) + MINUTE)
        status = snapshot(env.store, env.cfg.shard_count, env.clock.now_ms())
        assert status.behind == [] and status.due_soon == []


def test_top_walks_a_manual_run_in_a_successor_chain() -> None:
    """The chain from the head passes a manual run (not an occurrence item): read by its key."""
    with build("memory", successor=True) as env:
        current = claimed_twice(env)
        manual = env.ops().trigger("j1", "r1")
        status = snapshot(env.store, env.cfg.shard_count, env.clock.now_ms())
        (chain,) = [chain for job_item, _, chain in status.jobs if job_item["job_id"] == "j1"]
        assert [run["run_id"] for run in chain[:2]] == [manual, current["after_run_id"]]


def test_the_view_of_a_max_runs_job_still_parses_as_its_definition() -> None:
    """The view adds only the state's attributes a definition ignores (``STATE_FIELDS``): with a
    count in it, ``describe`` and ``_definition`` could not read the job back."""
    with build("memory", successor=True) as env:
        successor_job(env, job(max_runs=3))
        view = env.ops().get("j1")
        assert JobDefinition.from_item(view).max_runs == 3
        assert describe(view, [], env.clock.now_ms(), 1)["next"]
        assert env.ops().trigger("j1", "r1")


# --- the worker ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_adoption_starts_a_claimed_run_whose_message_carried_an_old_version(kind: str) -> None:
    """HC3: a claimer holding the head from before a manual run's relink claims it and sends the
    old version. The worker (adoption on, as the Lambda wiring builds it) starts the run at its own
    version and link (behind M) instead of dropping the message."""
    with build(kind, successor=True) as env:
        env.registry.add("t", Counter())
        stale = successor_job(env, job(overlap="allow"))
        manual = env.ops().trigger("j1", "r1")
        env.clock.set(int(stale["scheduled_at"]))
        env.store.write([claim_head_op(stale, env.clock.now_ms(), "t/stale", env.cfg)])
        old = message_of(env, stale)
        assert old.version < int(env.run(str(stale["run_id"]))["version"])
        worker = env.worker(adopt_scheduled=True)
        assert worker.process(old, T0 + 10 * MINUTE) is Outcome.SUCCEEDED
        assert env.run(str(stale["run_id"]))["status"] == RunStatus.SUCCEEDED.value
        assert env.telemetry.named("run.adopted")
        assert env.run(str(stale["run_id"]))["after_run_id"] == manual


def test_adoption_never_starts_a_pending_run() -> None:
    """A manual run is ``pending``: a message at an older version than the run's is dropped."""
    with build("memory", successor=True) as env:
        env.registry.add("t", Counter())
        successor_job(env, job())
        manual = env.ops().trigger("j1", "r1")
        sent = parse_run_message(env.queue.sent[0].body)
        env.store.update(_bump(manual))
        worker = env.worker(adopt_scheduled=True)
        assert worker.process(sent, T0 + 10 * MINUTE) is Outcome.DUPLICATE
        assert env.run(manual)["status"] == RunStatus.PENDING.value
        assert not env.telemetry.named("run.adopted")


def _bump(run_id: str) -> Any:
    from jobsched.core.writes import Update

    return Update(RUNS, run_key(run_id), condition=(), label="a redispatch", set={"version": 2})


class CountingStore:
    """The environment's store, counting the runs table's GetItems."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.run_gets = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get(self, table: str, key: dict[str, Any], consistent: bool = True) -> Any:
        if table == RUNS:
            self.run_gets += 1
        return self._inner.get(table, key, consistent)


@pytest.mark.parametrize("adopt", [False, True])
def test_adoption_reads_nothing_on_a_legacy_stack(adopt: bool) -> None:
    """A duplicate message on a legacy stack: its refused start read the run ``pending`` (or
    finished), never ``scheduled``, so adoption (on in the Lambda wiring) adds no GetItem."""
    counts: dict[bool, int] = {}
    for on in (False, adopt):
        with build("memory") as env:
            env.registry.add("t", Counter())
            ops = env.ops()
            ops.register(job())
            manual = ops.trigger("j1", "r1")
            sent = parse_run_message(env.queue.sent[0].body)
            env.store.update(_bump(manual))
            counting = CountingStore(env.store)
            env.store = counting  # type: ignore[assignment]
            assert env.worker(adopt_scheduled=on).process(sent, T0 + 10 * MINUTE) is Outcome.DUPLICATE
            counts[on] = counting.run_gets
    assert counts[adopt] == counts[False]


@pytest.mark.usefixtures("aws")
def test_the_lambda_wiring_turns_adoption_on() -> None:
    """The worker function's Worker adopts (HC3): free on legacy stacks, as the test above shows."""
    from jobsched.runtime import wiring

    assert wiring.app().worker("w1")._adopt_scheduled is True


# --- load_job ----------------------------------------------------------------------------------


def test_load_job_compares_the_digest_with_the_heads() -> None:
    """A successor run is claimed with the definition whose digest is the head's ``def_hash``: the
    state's may lag or lead it (HC10); a definition that differs from the head's is repaired."""
    with build("memory", successor=True) as env:
        current = successor_job(env, job())
        state = {**env.state("j1"), "def_hash": "another"}
        repaired: list[str] = []
        loaded = load_job(env.store, state, repaired.append, head=current)
        assert loaded is not None and loaded.def_hash == current["def_hash"] and repaired == []
        assert load_job(env.store, state, repaired.append) is None and repaired == ["j1"]
        stale = {**current, "def_hash": "old"}
        assert load_job(env.store, env.state("j1"), repaired.append, head=stale) is None


def test_a_legacy_job_on_a_successor_stack_is_triggered_as_today() -> None:
    """A state still in ``next-run`` is legacy: no head is looked for, the state's chain end moves.
    (Registered before the switch was set: with it on, the registrar makes a head.)"""
    with build("memory", successor=True) as env:
        current = env.store.get(STATE, dict(BOOKKEEPING_KEY))
        env.store.write([bookkeeping_op(current, {CLAIM_SHAPE_ATTRIBUTE: "legacy"}, (), T0)])
        env.ops().register(job())
        switch_to_successor(env)
        assert "next_run_at" in env.state("j1")
        manual = env.ops().trigger("j1", "r1")
        assert env.state("j1")["latest_run_id"] == manual
