"""A run item keeps its definition's digest, not the definition (issue 14): the message carries
the definition, and whoever sends a run without one reads it back from the job item or from the
snapshot the registrar kept. A run claimed before an edit still runs under the definition it was
claimed with, after any recovery."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from harness import KINDS, T0, Env, build, default_cfg, job
from jobsched.core.job import JobDefinition, OverlapPolicy
from jobsched.core.run import run_id_for, run_key
from jobsched.core.transitions import retention_expiry, snapshot_key
from jobsched.core.writes import RUNS, STATE


@pytest.fixture(params=KINDS)
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    with build(request.param, default_cfg(lookahead_seconds=90), start_ms=T0 - 30_000) as built:
        yield built


def payload_job(version: int) -> JobDefinition:
    return job("e", "rate(1 minute)", payload={"v": version}, overlap=OverlapPolicy.ALLOW)


def sent_payloads(env: Env, run_id: str) -> list[object]:
    return [m.body["definition"]["payload"] for m in env.queue.sent if m.body["run_id"] == run_id]


def test_a_run_claimed_before_an_edit_is_redispatched_with_the_definition_it_was_claimed_under(
    env: Env,
) -> None:
    ops = env.ops()
    ops.register(payload_job(1))
    env.trigger().tick("t")
    run_id = run_id_for("e", T0)
    assert "definition" not in env.run(run_id)  # the run item keeps the digest only
    ops.register(payload_job(2))  # an edit that keeps the timing: the job keeps its place
    # The first message is lost: the dispatch lease lapses and the miss detector sends it again,
    # with the definition read back from the registrar's snapshot (the job item now holds v2).
    env.clock.set(T0 + env.cfg.dispatch_lease_seconds * 1000 + env.cfg.clock_skew_allowance_ms + 1)
    env.detector().run("d")
    assert sent_payloads(env, run_id) == ['{"v":1}', '{"v":1}']  # (the payload as JSON text)


def test_the_registrar_keeps_the_current_definition_and_lets_superseded_ones_expire(env: Env) -> None:
    ops = env.ops()
    first, second = payload_job(1), payload_job(2)

    def snapshot(definition_hash: str) -> dict[str, object] | None:
        return env.store.get(STATE, snapshot_key("e", definition_hash))

    ops.register(first)
    current = snapshot(first.definition_hash())
    assert current is not None and "expires_at" not in current
    ops.register(second)
    old, new = snapshot(first.definition_hash()), snapshot(second.definition_hash())
    assert old is not None and old["expires_at"] == retention_expiry(env.clock.now_ms(), env.cfg)
    assert new is not None and "expires_at" not in new
    ops.delete("e")
    deleted = snapshot(second.definition_hash())
    assert deleted is not None and "expires_at" in deleted  # runs in flight may still need it
    ops.register(second)  # re-created as it was: the snapshot is current again
    revived = snapshot(second.definition_hash())
    assert revived is not None and "expires_at" not in revived
    assert env.state("e")["def_hash"] == second.definition_hash()


def test_a_run_whose_definition_is_gone_is_not_sent_and_says_so(env: Env) -> None:
    ops = env.ops()
    ops.register(payload_job(1))
    env.trigger().tick("t")
    run_id = run_id_for("e", T0)
    first_hash = payload_job(1).definition_hash()
    ops.register(payload_job(2))
    env.store.delete(STATE, snapshot_key("e", first_hash))  # as if its TTL had passed
    env.clock.set(T0 + env.cfg.dispatch_lease_seconds * 1000 + env.cfg.clock_skew_allowance_ms + 1)
    env.detector().run("d")
    assert len(sent_payloads(env, run_id)) == 1  # the first send only
    missing = env.telemetry.named("run.definition_missing")
    assert [e.correlation_id for e in missing] == [run_id]
    assert env.store.get(RUNS, run_key(run_id))["status"] == "pending"  # its lease says when to look again
