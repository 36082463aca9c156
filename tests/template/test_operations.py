"""template.yaml, issue 15: arm64, versions with rollback, the alarms and the dashboard.

Each test reads the template as written (``load_template``); cfn-lint, ``sam validate --lint`` and
``sam build`` (for arm64) run in ``make template-check``.
"""

from __future__ import annotations

from typing import Any

import pytest
from jobsched_tools.emulator.provision import load_template

FUNCTIONS = ("TriggerFunction", "WorkerFunction", "MissDetectorFunction", "RegistrarFunction")
LAYERS = ("JobschedLayer", "HandlersLayer")


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _function_property(template: dict[str, Any], function: str, key: str) -> Any:
    """A function's property as SAM sees it: its own value, else the Globals' one."""
    own = template["Resources"][function]["Properties"]
    return own.get(key, template["Globals"]["Function"].get(key))


# ---------------------------------------------------------------------------- 1. arm64


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_function_runs_on_arm64(template: dict[str, Any], function: str) -> None:
    assert _function_property(template, function, "Architectures") == ["arm64"]
    assert set(_resources(template, "AWS::Serverless::Function")) == set(FUNCTIONS)


@pytest.mark.parametrize("layer", LAYERS)
def test_every_layer_is_built_for_arm64(template: dict[str, Any], layer: str) -> None:
    resource = template["Resources"][layer]
    assert resource["Properties"]["CompatibleArchitectures"] == ["arm64"]
    # Without it, sam build fetches x86_64 wheels for a layer whatever it declares.
    assert resource["Metadata"]["BuildArchitecture"] == "arm64"


@pytest.mark.parametrize("function", FUNCTIONS)
def test_the_handler_is_declared_once_in_globals(template: dict[str, Any], function: str) -> None:
    assert template["Globals"]["Function"]["Handler"] == "app.lambda_handler"
    assert "Handler" not in template["Resources"][function]["Properties"]


# ---------------------------------------------------------------------------- 2. versions, rollback


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_function_publishes_a_live_alias_with_a_guarded_deployment(
    template: dict[str, Any], function: str
) -> None:
    assert _function_property(template, function, "AutoPublishAlias") == "live"
    shared = template["Globals"]["Function"]["DeploymentPreference"]
    own = template["Resources"][function]["Properties"]["DeploymentPreference"]
    preference = {**shared, **own}  # SAM merges a function's map over the Globals' one
    assert preference["Type"] == {"Ref": "DeploymentType"}
    assert "AllAtOnce" in template["Parameters"]["DeploymentType"]["AllowedValues"]
    assert template["Parameters"]["DeploymentType"]["Default"].startswith(("Canary", "Linear"))
    alarms = [alarm["Ref"] for alarm in preference["Alarms"]]
    assert alarms, function
    for alarm in alarms:
        resource = template["Resources"][alarm]
        assert resource["Type"] == "AWS::CloudWatch::Alarm"
    # Each function's rollback alarm watches that function's errors.
    watched = {template["Resources"][a]["Properties"]["Dimensions"][0]["Value"]["Ref"] for a in alarms}
    assert function in watched


def test_event_source_mappings_invoke_the_alias(template: dict[str, Any]) -> None:
    mappings = _resources(template, "AWS::Lambda::EventSourceMapping")
    assert mappings
    for logical_id, mapping in mappings.items():
        target = mapping["Properties"]["FunctionName"]["Ref"]
        function, _, suffix = target.partition(".")
        assert function in FUNCTIONS and suffix == "Alias", (logical_id, target)
