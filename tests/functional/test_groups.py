"""Issue 29 part 4: groups and tags. ``jobsched list/pause/resume --group G --tag k=v`` in one
bounded operation (a paged scan with a filter and a maximum), each change the ordinary per-job
pause or resume, reporting what it did."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from harness import Env, build, job
from jobsched.core.job import InvalidJob, JobDefinition, read_enabled
from jobsched.core.state import Registration
from jobsched.core.writes import JOBS, Update
from jobsched_tools.emulator.provision import Resources
from test_cli_ops import as_json, run_cli


@pytest.fixture
def env() -> Any:
    with build("memory") as env:
        yield env


def _jobs(env: Env) -> None:
    ops = env.ops()
    ops.register(job("a1", group="billing", tags={"team": "pay", "tier": "1"}))
    ops.register(job("a2", group="billing", tags={"team": "pay"}))
    ops.register(job("a3", group="billing"))
    ops.register(job("b1", group="reports", tags={"team": "pay"}))
    ops.register(job("c1"))


def test_group_and_tags_are_validated() -> None:
    base = job("j").to_item()
    assert "group" not in base and "tags" not in base  # unset: the digest is as before
    assert JobDefinition.from_item({**base, "group": "billing/eu", "tags": {"k": "v"}}).group == "billing/eu"
    for bad in ({"group": "-x"}, {"group": ""}, {"tags": {"": "v"}}, {"tags": {"k": 1}}):
        with pytest.raises(InvalidJob):
            JobDefinition.from_item({**base, **bad})
    with pytest.raises(InvalidJob, match="the limit is 50"):
        JobDefinition.from_item({**base, "tags": {f"k{i}": "v" for i in range(51)}})


def test_select_by_group_and_tags(env: Env) -> None:
    _jobs(env)
    ops = env.ops()
    assert [j["job_id"] for j in ops.select("billing")] == ["a1", "a2", "a3"]
    assert [j["job_id"] for j in ops.select(tags={"team": "pay"})] == ["a1", "a2", "b1"]
    assert [j["job_id"] for j in ops.select("billing", {"team": "pay", "tier": "1"})] == ["a1"]
    assert len(ops.select("billing", limit=2)) == 2


def test_pause_and_resume_a_group_in_one_bounded_operation(env: Env) -> None:
    _jobs(env)
    ops = env.ops()
    done = ops.set_enabled_where(False, "billing", limit=2)
    assert done.more is True and set(done.jobs.values()) == {"paused"} and len(done.jobs) == 2
    done = ops.set_enabled_where(False, "billing", limit=2)  # again: goes on with the rest
    assert done.more is False and done.jobs == {"a3": "paused"}
    assert {j["job_id"]: j["status"] for j in map(ops.get, ("a1", "a2", "a3", "b1"))} == {
        "a1": "paused",
        "a2": "paused",
        "a3": "paused",
        "b1": "active",
    }
    done = ops.set_enabled_where(True, tags={"team": "pay"})
    assert done.more is False and sorted(done.jobs) == ["a1", "a2"]  # b1 was never paused
    assert env.state("a1")["status"] == "active"
    with pytest.raises(ValueError, match="never means every job"):
        ops.set_enabled_where(False)


def test_the_cli_lists_pauses_and_resumes_by_group_and_tag(
    capsys: pytest.CaptureFixture[str],
    resources: Resources,
    tmp_path: Path,
) -> None:
    spec = tmp_path / "jobs.json"
    base = {"schedule": "rate(1 hour)", "target": "log"}
    spec.write_text(
        json.dumps(
            [
                {**base, "job_id": "a1", "group": "billing", "tags": {"team": "pay"}},
                {**base, "job_id": "a2", "group": "billing"},
                {**base, "job_id": "b1", "tags": {"team": "pay"}},
            ]
        )
    )
    assert run_cli(capsys, resources, "register", str(spec))[0] == 0
    code, out, _ = run_cli(capsys, resources, "list", "--group", "billing", "--json")
    assert code == 0 and [j["job_id"] for j in as_json(out)] == ["a1", "a2"]
    code, out, _ = run_cli(capsys, resources, "pause", "--tag", "team=pay", "--json")
    assert as_json(out) == {"jobs": {"a1": "paused", "b1": "paused"}, "already": [], "more": False}
    code, out, _ = run_cli(capsys, resources, "resume", "--tag", "team=pay", "--max", "1")
    assert code == 0 and "a1: scheduled" in out and "more jobs match" in out
    code, _, err = run_cli(capsys, resources, "pause")
    assert code == 2 and "name a JOB" in err
    code, _, err = run_cli(capsys, resources, "pause", "--tag", "team")
    assert code == 2 and "key=value" in err


@pytest.mark.parametrize("stored", ["false", "no", "off", "OFF", 0, Decimal(0)])
def test_jobs_paused_in_any_accepted_form_are_not_paused_again(env: Env, stored: Any) -> None:
    """Issue 34 item 9: ``enabled`` read one way everywhere. A job a person paused by writing
    ``enabled`` as ``"off"`` or ``0`` (accepted by the item format) is paused for the registrar,
    so a group pause neither counts it against ``--max`` nor reports it unchanged."""
    ops = env.ops()
    for job_id in ("p1", "p2", "r1"):
        ops.register(job(job_id, group="billing"))
    for job_id in ("p1", "p2"):
        env.store.update(Update(JOBS, {"job_id": job_id}, (), "person pauses", set={"enabled": stored}))
        assert env.registrar().apply(job_id) is Registration.PAUSED
        assert read_enabled(env.job_item(job_id) or {}) is False
    done = ops.set_enabled_where(False, "billing", limit=1)
    assert done.jobs == {"r1": "paused"} and done.more is False
    done = ops.set_enabled_where(True, "billing", limit=3)
    assert done.jobs == {"p1": "scheduled", "p2": "scheduled", "r1": "scheduled"}


def test_enabled_is_read_as_the_definition_reads_it() -> None:
    base = job("j").to_item()
    for value in ("false", "no", "off", "N", "f", 0, "0", False, Decimal(0)):
        assert read_enabled({**base, "enabled": value}) is False
        assert JobDefinition.from_item({**base, "enabled": value}).enabled is False
    for value in ("true", "yes", "on", 1, Decimal(1), True):
        assert read_enabled({**base, "enabled": value}) is True
    assert read_enabled(base) is True  # absent: the default
    for value in ("maybe", 2, None):
        assert read_enabled({**base, "enabled": value}) is None
        with pytest.raises(InvalidJob):
            JobDefinition.from_item({**base, "enabled": value})
