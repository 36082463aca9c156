"""The registrar on a stack with the successor claim's migration switch on (issue 37; build plan §1
"change", "first registration", §3 HC1, HC2, HC5, HC10, HC12, §5): each change is one transaction
on the state and the job's head, and leaves exactly one head (none when paused, invalid, finished
or deleted) with the closed head's marker at its successor key. The reconcile pass finishes a life
whose finish write was lost (HC5), converts legacy states and counts them (§5)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from harness import KINDS, MINUTE, T0, Env, build, job, register_raw, switch_to_successor
from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE
from jobsched.core.errors import ConditionFailed
from jobsched.core.head import is_closure_marker, is_end_marker, is_unstarted_occurrence
from jobsched.core.run import end_run_id, run_id_for
from jobsched.core.state import Registration, differences
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY, bookkeeping_op
from jobsched.core.transitions.head_claim import claim_head_op
from jobsched.core.writes import JOBS, STATE, Update, WriteOp
from jobsched.services.completion import Completer, Completion
from jobsched.services.head_registrar import find_head, read_job_items
from jobsched.services.reconciler import Reconciler

MIN5 = 5 * MINUTE


@pytest.fixture(params=KINDS)
def senv(request: pytest.FixtureRequest) -> Iterator[Env]:
    """A successor stack on the in-memory store and on moto (end to end on DynamoDB's semantics)."""
    with build(request.param, successor=True) as env:
        yield env


def items(env: Env, job_id: str) -> dict[str, dict[str, Any]]:
    return {str(item["run_id"]): item for item in read_job_items(env.store, job_id)}


def heads(env: Env, job_id: str) -> list[dict[str, Any]]:
    found = items(env, job_id)
    return [i for i in found.values() if is_unstarted_occurrence(i) and str(i["next_key"]) not in found]


def the_head(env: Env, job_id: str) -> dict[str, Any]:
    found = heads(env, job_id)
    assert len(found) == 1, found
    return found[0]


def edit(env: Env, job_id: str, **fields: Any) -> Registration:
    env.store.update(Update(JOBS, {"job_id": job_id}, condition=(), label="person edits", set=fields))
    return env.registrar().apply(job_id)


def claim(env: Env, head: dict[str, Any]) -> None:
    """The trigger's claim of ``head`` (the successor claim's one put), at the clock's now."""
    env.store.write([claim_head_op(head, env.clock.now_ms(), "tick", env.cfg)])


@pytest.mark.parametrize("kind", KINDS)
def test_first_registration_makes_the_head_at_epoch_1(kind: str) -> None:
    with build(kind, successor=True) as env:
        register_raw(env, job("j1", "rate(5 minutes)").to_item())
        state = env.state("j1")
        assert state["status"] == "active" and state["version"] == 1 and state["epoch"] == 1
        assert "next_run_at" not in state and "sched_shard" not in state and state["head_at"] == T0 + MIN5
        head = the_head(env, "j1")
        assert head["run_id"] == run_id_for("j1", T0 + MIN5, 1) and head["through"] == T0
        assert head["def_hash"] == job("j1", "rate(5 minutes)").definition_hash()
        assert env.job_item("j1")["status"] == "active"  # the report, as today
        # The head is in the due index, where the trigger and the detector find it.
        due = [
            e["run_id"]
            for s in range(env.cfg.shard_count)
            for e in env.store.query("due", s, 0, 10**15).items
        ]
        assert due == [head["run_id"]]
        # Applied again: nothing changes (its own report's record, a replay).
        assert env.registrar().apply("j1") is Registration.UNCHANGED
        assert env.state("j1")["version"] == 1


def test_the_switch_off_registers_as_today(senv: Env) -> None:
    current = senv.store.get(STATE, dict(BOOKKEEPING_KEY))
    senv.store.write([bookkeeping_op(current, {CLAIM_SHAPE_ATTRIBUTE: "legacy"}, (), T0)])
    register_raw(senv, job("j1", "rate(5 minutes)").to_item())
    state = senv.state("j1")
    assert state["next_run_at"] == T0 + MIN5 and "epoch" not in state and heads(senv, "j1") == []


def test_retime_closes_the_head_and_heads_the_new_timing_in_a_new_epoch(senv: Env) -> None:
    """HC1: every 5 min becoming every 10 min at 00:02 cancels 00:05#1, closes its successor key
    00:10#1 and heads 00:10#2."""
    register_raw(senv, job("j1", "rate(5 minutes)").to_item())
    senv.clock.advance(2 * MINUTE)
    assert edit(senv, "j1", schedule="rate(10 minutes)") is Registration.SCHEDULED
    found = items(senv, "j1")
    assert found[run_id_for("j1", T0 + MIN5, 1)]["status"] == "cancelled"
    marker = found[run_id_for("j1", T0 + 2 * MIN5, 1)]
    assert is_closure_marker(marker) and marker["closed_by"] == 2
    assert the_head(senv, "j1")["run_id"] == run_id_for("j1", T0 + 2 * MIN5, 2)
    state = senv.state("j1")
    assert state["version"] == state["epoch"] == 2 and state["head_at"] == T0 + 2 * MIN5


def test_pause_leaves_no_head_and_resume_heads_the_same_instant(senv: Env) -> None:
    """HC2: a pause at 00:02 cancels 00:05#1 and closes 00:10#1; a resume at 00:04 heads 00:05#3."""
    register_raw(senv, job("j1", "rate(5 minutes)").to_item())
    senv.clock.advance(2 * MINUTE)
    assert edit(senv, "j1", enabled=False) is Registration.PAUSED
    assert heads(senv, "j1") == [] and senv.state("j1")["status"] == "paused"
    assert is_closure_marker(items(senv, "j1")[run_id_for("j1", T0 + 2 * MIN5, 1)])
    assert senv.job_item("j1")["status"] == "paused"
    senv.clock.advance(2 * MINUTE)
    assert edit(senv, "j1", enabled=True) is Registration.SCHEDULED
    assert the_head(senv, "j1")["run_id"] == run_id_for("j1", T0 + MIN5, 3)


def test_an_edit_that_keeps_the_timing_is_a_change(senv: Env) -> None:
    """HC10: the head carries the digest, so a payload edit closes it and heads the same instant
    in the next epoch, carrying the new digest."""
    register_raw(senv, job("j1", "rate(5 minutes)").to_item())
    assert edit(senv, "j1", payload={"v": 2}) is Registration.SCHEDULED
    found = items(senv, "j1")
    assert found[run_id_for("j1", T0 + MIN5, 1)]["status"] == "cancelled"
    head = the_head(senv, "j1")
    assert head["run_id"] == run_id_for("j1", T0 + MIN5, 2)
    assert (
        head["def_hash"] == senv.state("j1")["def_hash"] != found[run_id_for("j1", T0 + MIN5, 1)]["def_hash"]
    )


def test_delete_closes_the_head_and_leaves_none(senv: Env) -> None:
    register_raw(senv, job("j1", "rate(5 minutes)").to_item())
    senv.store.delete(JOBS, {"job_id": "j1"})
    assert senv.registrar().apply("j1") is Registration.DELETED
    assert heads(senv, "j1") == [] and senv.state("j1")["status"] == "deleted"
    assert is_closure_marker(items(senv, "j1")[run_id_for("j1", T0 + 2 * MIN5, 1)])


def test_an_invalid_item_closes_the_head_and_is_reported(senv: Env) -> None:
    register_raw(senv, job("j1", "rate(5 minutes)").to_item())
    assert edit(senv, "j1", schedule="cron(0 25 * * ? *)") is Registration.INVALID
    assert heads(senv, "j1") == [] and senv.state("j1")["status"] == "invalid"
    item = senv.job_item("j1")
    assert item["status"] == "invalid" and item["invalid_reasons"]
    assert ("InvalidJobs", 1, "Count") in senv.telemetry.metrics


def test_max_runs_lowered_then_raised(senv: Env) -> None:
    """HC5: a limit the head's run would reach makes its successor key the end marker; the claim of
    it ends the life; raising the limit is a change that heads a new life of the count."""
    register_raw(senv, job("j1", "rate(5 minutes)", max_runs=3).to_item())
    assert edit(senv, "j1", max_runs=1) is Registration.SCHEDULED
    head = the_head(senv, "j1")
    assert head["next_key"] == end_run_id("j1", T0 + MIN5, 2)
    senv.clock.advance(MIN5)
    claim(senv, head)  # the last run: the claim writes the end marker
    assert heads(senv, "j1") == [] and is_end_marker(items(senv, "j1")[head["next_key"]])
    senv.clock.advance(MINUTE)
    assert edit(senv, "j1", max_runs=2) is Registration.SCHEDULED
    raised = the_head(senv, "j1")
    assert raised["run_id"] == run_id_for("j1", T0 + 2 * MIN5, 3) and raised["runs_before"] == 1
    assert senv.state("j1")["status"] == "active"


def test_max_runs_lowered_to_the_count_finishes_the_job(senv: Env) -> None:
    register_raw(senv, job("j1", "rate(5 minutes)", max_runs=3).to_item())
    senv.clock.advance(MIN5)
    claim(senv, the_head(senv, "j1"))  # 00:05 runs: a count of 1
    senv.clock.advance(MINUTE)
    assert edit(senv, "j1", max_runs=1) is Registration.FINISHED
    assert heads(senv, "j1") == [] and senv.state("j1")["status"] == "finished"
    assert senv.state("j1")["runs_claimed"] == 1


class ClaimBeforeChange:
    """A store whose next change transaction is preceded by the trigger's claim of the head it
    closes: the claim lands first on the marker's key (build plan §1 "change")."""

    def __init__(self, env: Env) -> None:
        self.env, self.inner, self.raced, self.queries = env, env.store, False, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def query(self, *args: Any, **kwargs: Any) -> Any:
        self.queries += 1
        return self.inner.query(*args, **kwargs)

    def occurrence_items(self, *args: Any, **kwargs: Any) -> Any:
        self.queries += 1
        return self.inner.occurrence_items(*args, **kwargs)

    def write(self, ops: list[WriteOp]) -> None:
        if not self.raced and any(op.label == "change marker" for op in ops):
            self.raced = True
            closing = next(op for op in ops if op.label == "change closes head")
            claim(self.env, self.inner.get(closing.table, closing.key) or {})
        self.inner.write(ops)


def test_a_claim_racing_a_change_runs_and_the_change_closes_its_successor(senv: Env) -> None:
    register_raw(senv, job("j1", "rate(5 minutes)").to_item())
    senv.clock.advance(4 * MINUTE)
    racing = ClaimBeforeChange(senv)
    senv.store.update(
        Update(JOBS, {"job_id": "j1"}, condition=(), label="edit", set={"schedule": "rate(10 minutes)"})
    )
    registrar = senv.registrar()
    registrar._store = registrar._heads._store = racing  # type: ignore[assignment]
    assert registrar.apply("j1") is Registration.SCHEDULED
    assert racing.raced
    # The lost marker named the head to close now (``after_lost_change``): no second read.
    assert racing.queries == 1
    found = items(senv, "j1")
    # 00:05#1 was claimed: it runs as claimed; its successor 00:10#1 is the head the change closed.
    assert found[run_id_for("j1", T0 + MIN5, 1)]["status"] == "scheduled"
    assert found[run_id_for("j1", T0 + 2 * MIN5, 1)]["status"] == "cancelled"
    assert is_closure_marker(found[run_id_for("j1", T0 + 3 * MIN5, 1)])
    # The new timing heads after the claimed occurrence (through = 00:05): 00:10#2.
    assert the_head(senv, "j1")["run_id"] == run_id_for("j1", T0 + 2 * MIN5, 2)


def test_a_change_settles_the_due_head_first(senv: Env) -> None:
    """A change meeting a head due since 00:01 (no claim: the trigger was down) settles the old
    timing's occurrences up to the change first, then closes the head the settle left."""
    register_raw(senv, job("j1", "rate(1 minute)").to_item())
    senv.clock.advance(5 * MINUTE + 10_000)
    assert edit(senv, "j1", schedule="rate(10 minutes)") is Registration.SCHEDULED
    found = items(senv, "j1")
    for minute in range(1, 6):
        record = found[run_id_for("j1", T0 + minute * MINUTE, 1)]
        assert record["status"] in ("missed", "pending", "scheduled"), record
    assert sum(1 for i in found.values() if i["status"] == "missed") >= 1
    assert the_head(senv, "j1")["run_id"] == run_id_for("j1", T0 + 2 * MIN5, 2)


def test_a_pause_records_the_due_occurrences_missed_with_its_reason(senv: Env) -> None:
    """A pause meeting a head due since 00:01 records every occurrence of the old timing up to the
    pause ``missed``, "job paused before it ran" (today's rule, docs/design.md "What a change to a
    job does"), and leaves no head."""
    register_raw(senv, job("j1", "rate(1 minute)").to_item())
    senv.clock.advance(5 * MINUTE + 10_000)
    assert edit(senv, "j1", enabled=False) is Registration.PAUSED
    found = items(senv, "j1")
    for minute in range(1, 6):
        record = found[run_id_for("j1", T0 + minute * MINUTE, 1)]
        assert record["status"] == "missed" and record["reason"] == "job paused before it ran", record
    assert heads(senv, "j1") == [] and senv.state("j1")["status"] == "paused"


def test_a_legacy_state_is_converted_first_then_changed(senv: Env) -> None:
    current = senv.store.get(STATE, dict(BOOKKEEPING_KEY))
    senv.store.write([bookkeeping_op(current, {CLAIM_SHAPE_ATTRIBUTE: "legacy"}, (), T0)])
    register_raw(senv, job("j1", "rate(5 minutes)").to_item())
    assert "next_run_at" in senv.state("j1")
    switch_to_successor(senv)
    senv.clock.advance(MINUTE)
    assert edit(senv, "j1", enabled=False) is Registration.PAUSED
    state = senv.state("j1")
    assert "next_run_at" not in state and state["status"] == "paused" and state["epoch"] == 3
    found = items(senv, "j1")
    assert found[run_id_for("j1", T0 + MIN5, 2)]["status"] == "cancelled"  # the converted head
    assert heads(senv, "j1") == []


# --- the reconcile pass ---------------------------------------------------------------------------


def reconcile(env: Env) -> Any:
    return Reconciler(env.store, env.telemetry, env.clock, env.cfg, env.registrar()).run(lambda: True)


def test_the_pass_finishes_a_life_whose_finish_write_was_lost(senv: Env) -> None:
    """HC5: the last claim wrote the end marker and the trigger's finish write was lost: the
    state reads ``active``; the pass reads the head and the marker and finishes it."""
    register_raw(senv, job("j1", "rate(5 minutes)", max_runs=1).to_item())
    senv.clock.advance(MIN5)
    claim(senv, the_head(senv, "j1"))
    assert senv.state("j1")["status"] == "active"
    done = reconcile(senv)
    assert done.finished == 1
    state = senv.state("j1")
    assert state["status"] == "finished" and state["runs_claimed"] == 1
    assert state["latest_run_id"] == run_id_for("j1", T0 + MIN5, 1)
    assert reconcile(senv).finished == 0  # level-triggered, and once


def test_the_pass_converts_legacy_states_and_counts_them(senv: Env) -> None:
    current = senv.store.get(STATE, dict(BOOKKEEPING_KEY))
    senv.store.write([bookkeeping_op(current, {CLAIM_SHAPE_ATTRIBUTE: "legacy"}, (), T0)])
    register_raw(senv, job("j1", "rate(5 minutes)").to_item())
    register_raw(senv, job("j2", "rate(7 minutes)").to_item())
    next_runs = {job_id: senv.state(job_id)["next_run_at"] for job_id in ("j1", "j2")}
    switch_to_successor(senv)
    done = reconcile(senv)
    assert done.legacy_states == 2 and done.converted == 2
    for job_id, next_run_at in next_runs.items():
        state = senv.state(job_id)
        assert "next_run_at" not in state and state["epoch"] == 2
        assert the_head(senv, job_id)["run_id"] == run_id_for(job_id, next_run_at, 2)
    assert ("LegacyStates", 2, "Count") in senv.telemetry.metrics
    line = senv.telemetry.named("reconcile.successor_claim")[-1]
    assert line.fields["legacy_states"] == 2 and line.fields["converted"] == 2
    book = senv.store.get(STATE, dict(BOOKKEEPING_KEY)) or {}
    assert book["legacy_last_pass"] == 2  # the pass completed (two jobs, one page)
    assert reconcile(senv).legacy_states == 0
    assert (senv.store.get(STATE, dict(BOOKKEEPING_KEY)) or {})["legacy_last_pass"] == 0


def test_differences_do_not_flag_a_successor_state(senv: Env) -> None:
    register_raw(senv, job("j1", "rate(5 minutes)").to_item())
    item = senv.job_item("j1") or {}
    assert differences(item, senv.state("j1"), senv.cfg.shard_count) == []
    assert reconcile(senv).reconciled == 0


def test_delete_after_completion_of_a_successor_job(senv: Env) -> None:
    register_raw(senv, job("j1", "rate(5 minutes)", max_runs=1, action_after_completion="delete").to_item())
    senv.clock.advance(MIN5)
    claim(senv, the_head(senv, "j1"))
    reconcile(senv)  # finishes the life (the trigger's finish write was lost)
    completer = Completer(senv.store, senv.telemetry, senv.registrar())
    item = senv.job_item("j1") or {}
    # The claimed run is ``scheduled`` until it starts: not complete yet.
    assert completer.consider(item, senv.state("j1")) is Completion.RUNS_UNFINISHED
    run_id = run_id_for("j1", T0 + MIN5, 1)
    senv.store.update(
        Update(
            "runs", {"job_id": "j1", "run_id": run_id}, condition=(), label="ran", set={"status": "succeeded"}
        )
    )
    assert completer.consider(item, senv.state("j1")) is Completion.DELETED
    assert senv.job_item("j1") is None and senv.state("j1")["status"] == "deleted"


def test_find_head_reads_again_on_two_heads() -> None:
    a = {
        "job_id": "j",
        "run_id": run_id_for("j", T0, 1),
        "status": "scheduled",
        "kind": "scheduled",
        "epoch": 1,
        "next_key": run_id_for("j", T0 + MINUTE, 1),
    }
    b = {**a, "run_id": run_id_for("j", T0, 2), "epoch": 2, "next_key": run_id_for("j", T0 + MINUTE, 2)}
    assert find_head([a, b], None).ambiguous and find_head([a], None).head == a


def test_a_lost_conversion_is_read_again(senv: Env) -> None:
    """A conversion whose state moved (an old-code claim) raises ConditionFailed to the caller."""
    from jobsched.services.definitions import Definitions
    from jobsched.services.head_registrar import convert_legacy

    current = senv.store.get(STATE, dict(BOOKKEEPING_KEY))
    senv.store.write([bookkeeping_op(current, {CLAIM_SHAPE_ATTRIBUTE: "legacy"}, (), T0)])
    register_raw(senv, job("j1", "rate(5 minutes)").to_item())
    stale = {**senv.state("j1"), "version": 0}
    with pytest.raises(ConditionFailed):
        convert_legacy(senv.store, senv.cfg, Definitions(senv.store, senv.cfg), stale, T0)
    assert "next_run_at" in senv.state("j1")
