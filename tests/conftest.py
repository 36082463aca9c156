"""Shared fixtures: every test runs with dummy AWS credentials and a fixed region, so that no
test can reach a real AWS account and boto3 never looks for a profile."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from jobsched_tools.emulator.credentials import DUMMY_ACCESS_KEY_ID, DUMMY_AWS_ENV, LOCAL_REGION

AWS_TEST_ENV = {
    **DUMMY_AWS_ENV,
    "AWS_SECURITY_TOKEN": DUMMY_ACCESS_KEY_ID,
    "AWS_SESSION_TOKEN": DUMMY_ACCESS_KEY_ID,
    "AWS_REGION": LOCAL_REGION,
}

# Hypothesis's default deadline (200 ms an example) and its too-slow health check are timed
# tests: on two loaded cores a plain run id round trip failed each once (``test_run_key.py``,
# 2026-12-05). Tests assert behaviour; speed is the benchmarks' business.
settings.register_profile("jobsched", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("jobsched")


@pytest.fixture(autouse=True)
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in AWS_TEST_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"):
        monkeypatch.delenv(name, raising=False)
