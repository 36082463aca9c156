"""Issue 27, item 8: every parameter combination the template accepts works.

Each combination that used to pass its own bounds and break the stack is now refused before
CloudFormation changes anything: by the template's Rules (evaluated here in Python, as
CloudFormation does: ``jobsched_tools.ops.rules.evaluate``) or by tighter bounds. The tests walk
the boundaries and check the Rules against the settings' own validation, value by value."""

from __future__ import annotations

from typing import Any

import pytest
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition
from jobsched_tools.emulator.provision import find_template, load_template
from jobsched_tools.iam.policy import transform
from jobsched_tools.ops import rules
from pydantic import ValidationError


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def test_the_rules_block_is_what_the_generator_writes(template: dict[str, Any]) -> None:
    text = find_template().read_text(encoding="utf-8")
    assert rules.current(text) == rules.render(), "run python -m jobsched_tools.ops.rules"
    assert template["Rules"] == rules.rules()
    # SAM keeps the section for CloudFormation (offline transform).
    assert transform(template)["Rules"] == rules.rules()


def test_the_rules_use_only_rule_functions(template: dict[str, Any]) -> None:
    allowed = {"Fn::And", "Fn::Contains", "Fn::EachMemberEquals", "Fn::EachMemberIn", "Fn::Equals"}
    allowed |= {"Fn::Not", "Fn::Or", "Fn::RefAll", "Fn::ValueOf", "Fn::ValueOfAll", "Ref"}

    def functions(node: Any) -> set[str]:
        if isinstance(node, dict):
            return set(node) | {f for value in node.values() for f in functions(value)}
        if isinstance(node, list):
            return {f for value in node for f in functions(value)}
        return set()

    for rule in template["Rules"].values():
        used = functions(rule.get("RuleCondition", {})) | functions([a["Assert"] for a in rule["Assertions"]])
        assert used <= allowed, used - allowed


def test_the_defaults_and_every_samconfig_environment_pass(template: dict[str, Any]) -> None:
    from test_template import _samconfig_overrides

    assert rules.evaluate(template, {}) == []
    for env in ("default", "dev", "prod"):
        assert rules.evaluate(template, _samconfig_overrides(env)) == [], env


def test_lookahead_must_exceed_the_tick_interval(template: dict[str, Any]) -> None:
    assert template["Parameters"]["TickRate"]["AllowedValues"] == list(rules.TICK_RATES)
    maximum = template["Parameters"]["LookaheadSeconds"]["MaxValue"]
    for rate, seconds in rules.TICK_RATES.items():
        least = seconds + rules.LOOKAHEAD_SLACK_S
        assert least <= maximum, rate  # each allowed tick has a working lookahead
        for lookahead in (1, seconds - 1, seconds, least - 1):
            assert rules.evaluate(template, {"TickRate": rate, "LookaheadSeconds": lookahead}), (
                rate,
                lookahead,
            )
        for lookahead in (least, least + 1, maximum):
            assert rules.evaluate(template, {"TickRate": rate, "LookaheadSeconds": lookahead}) == []


def test_lease_and_heartbeat_the_rules_accept_are_what_the_settings_accept(template: dict[str, Any]) -> None:
    """Every allowed heartbeat against every lease in bounds: the Rules refuse exactly the pairs
    the settings would refuse at each cold start (which would roll the canary back)."""
    heartbeat = template["Parameters"]["HeartbeatSeconds"]
    lease = template["Parameters"]["LeaseSeconds"]
    assert [int(v) for v in heartbeat["AllowedValues"]] == list(rules.HEARTBEATS)
    assert str(heartbeat["Default"]) in [str(v) for v in heartbeat["AllowedValues"]]
    for beat in rules.HEARTBEATS:
        for seconds in range(lease["MinValue"], lease["MaxValue"] + 1):
            refused = bool(rules.evaluate(template, {"HeartbeatSeconds": beat, "LeaseSeconds": seconds}))
            try:
                SchedulerConfig(heartbeat_seconds=beat, lease_seconds=seconds)
                works = True
            except ValidationError:
                works = False
            assert refused is not works, (beat, seconds)
    # The case: the default heartbeat (10) with a lease of 5 to 19 s.
    for seconds in range(5, 20):
        assert rules.evaluate(template, {"LeaseSeconds": seconds}), seconds
    assert rules.evaluate(template, {"LeaseSeconds": 20}) == []


def test_the_deadline_margin_leaves_each_function_most_of_its_time(template: dict[str, Any]) -> None:
    margin_max_s = template["Parameters"]["DeadlineMarginMs"]["MaxValue"] / 1000
    assert template["Parameters"]["DeadlineMarginMs"]["MaxValue"] == 15_000
    timeouts = [template["Globals"]["Function"]["Timeout"]]  # trigger, detector, registrar
    timeouts += [int(t) for t in template["Parameters"]["WorkerTimeoutSeconds"]["AllowedValues"]]
    for timeout in timeouts:
        assert margin_max_s <= timeout / 4, timeout
    with pytest.raises(ValidationError):
        SchedulerConfig(deadline_margin_ms=60_000)  # as large as a function's timeout: refused


def test_the_default_job_fits_every_worker_timeout(template: dict[str, Any]) -> None:
    """A job's default timeout_seconds, plus the largest margin, plus the wait for the exact
    second (up to 1 s) and the run's start and commit, fits in each allowed worker timeout."""
    job_timeout = JobDefinition.model_fields["timeout_seconds"].default
    assert job_timeout == 60
    margin_max_s = template["Parameters"]["DeadlineMarginMs"]["MaxValue"] / 1000
    allowed = [int(t) for t in template["Parameters"]["WorkerTimeoutSeconds"]["AllowedValues"]]
    assert 60 not in allowed
    for timeout in allowed:
        assert job_timeout + margin_max_s + 5 <= timeout, timeout
    assert set(template["Mappings"]["QueueVisibility"]) == {str(t) for t in allowed}
