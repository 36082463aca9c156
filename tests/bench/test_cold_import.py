"""The cold-import probe (bench/cold_import.py) imports what a Lambda has and nothing else: the
runtime's boto3 and the layer's locked requirements, not this venv's 130-odd other distributions
(awscrt, pyOpenSSL, moto, ...), which would change what boto3 and pydantic import at cold start."""

from __future__ import annotations

from pathlib import Path

import pytest
from jobsched_tools.bench import cold_import


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cold_import.lambda_site(tmp_path_factory.mktemp("lambda-site"))


def test_the_site_holds_the_runtime_s_and_the_layer_s_packages_only(site: Path) -> None:
    names = {path.name for path in site.iterdir()}
    for package in ("boto3", "botocore", "s3transfer", "pydantic", "pydantic_core", "aws_lambda_powertools"):
        assert package in names, package
    assert "typing_extensions.py" in names and "six.py" in names
    for absent in ("awscrt", "OpenSSL", "moto", "yaml", "pydantic_settings", "dotenv"):
        assert absent not in names, absent


def test_a_probe_sees_the_site_and_not_this_venv(site: Path) -> None:
    import_ms, first_call_ms, import_cpu_ms, first_call_cpu_ms = cold_import._once(
        "boto3", [str(site)], cold_import.FIRST_CALL["boto3"]
    )
    assert min(import_ms, first_call_ms, import_cpu_ms, first_call_cpu_ms) > 0
    with pytest.raises(RuntimeError, match="No module named 'moto'"):
        cold_import._once("moto", [str(site)], "")
