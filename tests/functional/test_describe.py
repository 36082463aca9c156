"""Issue 38, item 4: ``jobsched describe JOB``, one view of a job's past and future, on the
in-memory store and on DynamoDB on moto (the data), and through the CLI on moto (the screen and
``--json``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import KINDS, MINUTE, T0, Env, build, job, register_raw
from jobsched.core.clock import iso_z as ms_to_iso
from jobsched.core.job import RetryPolicy
from jobsched.core.timing import start_at_ms
from jobsched.core.transitions import pause_on_failure_op
from jobsched.services.messages import parse_run_message
from jobsched_tools.cli.cmd_describe import describe, render
from jobsched_tools.emulator.provision import Resources
from test_cli_ops import run_cli

DEADLINE = 900_000


def _fail_every_other(ctx: Any) -> None:
    if ctx.scheduled_at % (2 * MINUTE) == 0:
        raise RuntimeError("even minute")


@pytest.fixture(params=KINDS)
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    with build(request.param) as built:
        built.registry.add("t", _fail_every_other)
        yield built


def _run_two(env: Env) -> list[str]:
    """Claim (one tick, its lookahead covers 00:01 and 00:02) and run the job's first two
    occurrences: one succeeds, one fails."""
    env.clock.set(T0 + 50_000)
    env.trigger().tick("tick")
    ran = []
    for sent in list(env.queue.sent):
        message = parse_run_message(sent.body)
        env.clock.set(start_at_ms(message.run_id, message.scheduled_at, message.definition) + 250)
        env.worker().process(message, env.clock.now_ms() + DEADLINE)
        ran.append(message.run_id)
    return ran


def test_describe_shows_the_definition_state_runs_and_next_instants(env: Env) -> None:
    env.clock.set(T0)
    definition = job(
        "j", "rate(1 minute)", timezone="Europe/Berlin", jitter_seconds=30, retry=RetryPolicy(max_attempts=1)
    )
    register_raw(env, definition.to_item())
    ran = _run_two(env)
    ops = env.ops()
    data = describe(ops.get("j"), ops.runs("j", 10), env.clock.now_ms(), 3)

    # The definition as registered, defaults included (fields the item never wrote).
    assert data["definition"]["timezone"] == "Europe/Berlin"
    assert data["definition"]["misfire"] == {"policy": "run_once", "grace_seconds": 60, "max_catchup": 10}
    assert data["definition"]["overlap"] == "skip" and data["definition"]["max_event_age_seconds"] is None

    state = data["state"]
    assert state["status"] == "active" and state["pause_reasons"] == []
    assert state["chain_end"] == ran[-1]
    assert state["position"] == "2026-12-01T00:03:00Z"  # the next unclaimed instant

    runs = {run["run_id"]: run for run in data["recent_runs"]}
    assert set(runs) == set(ran)
    failed = runs["j@2026-12-01T00:02:00Z"]
    assert (
        failed["outcome"] == "failed"
        and failed["attempts"] == 1
        and failed["reason"] == "RuntimeError: even minute"
    )
    succeeded = runs["j@2026-12-01T00:01:00Z"]
    assert succeeded["outcome"] == "succeeded" and succeeded["lag_ms"] == 250  # against the jittered start
    assert data["recent_runs"][0]["scheduled_at"] > data["recent_runs"][1]["scheduled_at"]  # newest first

    # The next instants from the position, each with its start in the window, in UTC and Berlin.
    nxt = data["next"]
    assert [n["instant"] for n in nxt] == [
        "2026-12-01T00:03:00Z",
        "2026-12-01T00:04:00Z",
        "2026-12-01T00:05:00Z",
    ]
    assert nxt[0]["instant_local"] == "2026-12-01T01:03:00+01:00"
    for upcoming in nxt:
        assert 0 <= upcoming["jitter_ms"] <= 30_000
    assert any(upcoming["jitter_ms"] for upcoming in nxt)  # a digest of each run id: not all zero
    screen = render(data)
    for section in ("definition (as registered, with defaults):", "state:", "last 2 runs", "next 3 instants"):
        assert section in screen
    assert "RuntimeError: even minute" in screen and "01:03:00+01:00" in screen


def test_describe_says_why_a_job_is_paused_and_shows_no_next_instant(env: Env) -> None:
    env.clock.set(T0)
    register_raw(env, job("j", "rate(1 minute)").to_item())
    item = env.job_item("j")
    assert item is not None
    env.store.update(pause_on_failure_op(item, "run j@x failed: boom", T0))
    env.registrar().apply("j")
    ops = env.ops()
    data = describe(ops.get("j"), ops.runs("j", 10), env.clock.now_ms(), 3)
    assert data["state"]["status"] == "paused"
    assert data["state"]["pause_reasons"] == [
        "enabled is false",
        "paused by pause_on_failure: run j@x failed: boom",
    ]
    assert data["next"] == [] and data["recent_runs"] == []


def _cli(capsys: pytest.CaptureFixture[str], resources: Resources, *args: str) -> tuple[int, str]:
    code, out, _err = run_cli(capsys, resources, *args)
    return code, out


def test_the_cli_screen_and_json_carry_the_same_data(
    capsys: pytest.CaptureFixture[str], resources: Resources, tmp_path: Path
) -> None:
    spec = {
        "job_id": "nightly",
        "schedule": "cron(0 3 * * ? *)",
        "timezone": "America/New_York",
        "target": "log",
    }
    (tmp_path / "job.json").write_text(json.dumps(spec))
    assert _cli(capsys, resources, "register", str(tmp_path / "job.json"))[0] == 0
    code, out = _cli(capsys, resources, "describe", "nightly", "--json", "--next", "2")
    assert code == 0
    data = json.loads(out.strip().splitlines()[-1])
    assert data["definition"]["retry"]["max_attempts"] == 3  # a default
    assert len(data["next"]) == 2 and data["next"][0]["instant_local"].endswith("03:00:00-05:00")
    code, screen = _cli(capsys, resources, "describe", "nightly", "--next", "2")
    assert code == 0
    assert data["next"][0]["instant"] in screen and data["next"][0]["instant_local"] in screen
    assert "status: active" in screen and "none" in screen  # no runs yet
    code, _ = _cli(capsys, resources, "describe", "absent")
    assert code == 2


@pytest.fixture(params=KINDS)
def senv(request: pytest.FixtureRequest) -> Iterator[Env]:
    with build(request.param, successor=True) as built:
        yield built


def test_a_successor_job_s_next_starts_are_its_runs_starts(senv: Env) -> None:
    """Under the successor claim (issue 37) an occurrence's run id carries the head's epoch, and
    the offset in ``jitter_seconds`` is a digest of that id: describe predicts each start from the
    id the claim will write, so the start a claimed run's message gets is the one it showed."""
    senv.clock.set(T0)
    register_raw(senv, job("j", "rate(15 minutes)", jitter_seconds=600).to_item())
    ops = senv.ops()
    runs = ops.runs("j", 10)
    assert [run["run_id"] for run in runs] == ["j@2026-12-01T00:15:00Z#1"]  # the head, epoch 1
    predicted = {n["instant"]: n["jitter_ms"] for n in describe(ops.get("j"), runs, T0, 3)["next"]}
    assert len(predicted) == 3
    senv.clock.set(T0 + 14 * MINUTE + 50_000)
    senv.trigger().tick("tick")  # claims the head, 00:15
    sent = [parse_run_message(message.body) for message in senv.queue.sent]
    assert sent and all(message.run_id.endswith("#1") for message in sent)
    for message in sent:
        start = start_at_ms(message.run_id, message.scheduled_at, message.definition)
        instant = ms_to_iso(message.scheduled_at)
        assert predicted[instant] == start - message.scheduled_at, message.run_id
