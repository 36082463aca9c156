"""runtime/settings.py: the functions' configuration from their environment variables, validated
with the bounds of its one source (SchedulerConfig), without pydantic-settings (issue 17); and the
App built from them (runtime/wiring.py)."""

from __future__ import annotations

import pytest
from jobsched.core.config import SchedulerConfig
from jobsched.runtime.settings import Settings
from jobsched.runtime.wiring import App
from pydantic import ValidationError

REQUIRED = {"JOBS_TABLE": "jobs", "STATE_TABLE": "state", "RUNS_TABLE": "runs", "WORK_QUEUE_URL": "q"}


def test_the_environment_s_values_are_parsed_and_the_rest_default() -> None:
    env = REQUIRED | {"SHARD_COUNT": "4", "WORKER_RECORD_CONCURRENCY": "3", "PATH": "/x"}
    settings = Settings.from_env(env)
    assert (settings.jobs_table, settings.work_queue_url) == ("jobs", "q")
    assert (settings.shard_count, settings.worker_record_concurrency) == (4, 3)
    assert settings.scheduler_config() == SchedulerConfig(shard_count=4)


def test_os_environ_is_the_default_source(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (REQUIRED | {"LEASE_SECONDS": "40"}).items():
        monkeypatch.setenv(name, value)
    assert Settings.from_env().lease_seconds == 40


def test_names_are_case_insensitive() -> None:
    assert Settings.from_env({k.lower(): v for k, v in REQUIRED.items()}).runs_table == "runs"


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("", []),  # what the template passes for an empty list parameter
        ("arn:aws:sqs:us-east-1:123456789012:a", ["arn:aws:sqs:us-east-1:123456789012:a"]),
        ("a, b,,c ", ["a", "b", "c"]),  # the template joins its lists with ","
    ],
)
def test_allow_lists_are_comma_separated(value: str, parsed: list[str]) -> None:
    lists = ("ALLOWED_QUEUE_ARNS", "ALLOWED_EVENT_BUS_ARNS", "ALLOWED_FUNCTION_ARNS")
    lists += ("STAGED_EFFECT_TABLE_ARNS",)
    settings = Settings.from_env(REQUIRED | dict.fromkeys(lists, value))
    assert settings.allowed_queue_arns == settings.allowed_event_bus_arns == parsed
    assert settings.allowed_function_arns == settings.staged_effect_table_arns == parsed


def test_the_lambda_worker_always_checks_staged_effects_against_the_stack_s_list() -> None:
    """The pure Worker takes None (any table) for tests on their own stores; the Lambda wiring
    passes the configured list, so an unset parameter allows no table, as the role grants none."""
    unset = App(Settings.from_env(REQUIRED)).worker("w")
    assert unset._effect_tables is not None and unset._effect_tables.allowed == ()
    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/ledger"
    listed = App(Settings.from_env(REQUIRED | {"STAGED_EFFECT_TABLE_ARNS": arn})).worker("w")
    assert listed._effect_tables is not None and listed._effect_tables.allows("ledger")


def test_a_missing_or_bad_value_fails_with_its_name() -> None:
    with pytest.raises(ValidationError, match="work_queue_url"):
        Settings.from_env({k: v for k, v in REQUIRED.items() if k != "WORK_QUEUE_URL"})
    with pytest.raises(ValidationError, match="shard_count"):
        Settings.from_env(REQUIRED | {"SHARD_COUNT": "eight"})
    with pytest.raises(ValidationError, match="worker_record_concurrency"):
        Settings.from_env(REQUIRED | {"WORKER_RECORD_CONCURRENCY": "0"})


def test_the_scheduler_s_bounds_and_rules_apply_when_its_config_is_built() -> None:
    with pytest.raises(ValidationError, match="shard_count"):
        Settings.from_env(REQUIRED | {"SHARD_COUNT": "1000"}).scheduler_config()
    with pytest.raises(ValidationError, match="heartbeat_seconds must be at most half"):
        Settings.from_env(REQUIRED | {"LEASE_SECONDS": "10", "HEARTBEAT_SECONDS": "6"}).scheduler_config()


def test_a_function_s_clients_share_one_boto3_session() -> None:
    """Each session loads botocore's endpoint, partition and retry data again (about 40 ms a
    client on a cold start's first call); the App's DynamoDB and SQS clients load them once."""
    app = App(Settings.from_env(REQUIRED))
    dynamodb, sqs = app.store.client, app.queue.client
    assert dynamodb.meta.service_model.service_name == "dynamodb"
    assert sqs.meta.service_model.service_name == "sqs"
    assert dynamodb._loader is sqs._loader  # type: ignore[attr-defined]
