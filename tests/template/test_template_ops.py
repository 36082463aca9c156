"""template.yaml, issue 15: arm64, versions with rollback, the alarms and the dashboard.

Each test reads the template as written (``load_template``); cfn-lint, ``sam validate --lint`` and
``sam build`` (for arm64) run in ``make template-check``.
"""

from __future__ import annotations

import ast
from typing import Any

import pytest
from jobsched_tools.emulator.provision import FUNCTION_IDS, find_template, load_template
from jobsched_tools.ops import alarms, dashboard

ROOT = find_template().parent
RUNTIME = ROOT / "layers" / "jobsched" / "jobsched"

FUNCTIONS = FUNCTION_IDS
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
    # The detector shifts linearly unless AllAtOnce (issue 35, item 8: test_deploy_safety.py).
    shifting = {"Fn::If": ["DeployAllAtOnce", "AllAtOnce", "Linear10PercentEvery1Minute"]}
    assert preference["Type"] == (
        shifting if function == "MissDetectorFunction" else {"Ref": "DeploymentType"}
    )
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


# ---------------------------------------------------------------------------- 4. alarms


def emitted_metrics() -> set[str]:
    """Every custom metric name the runtime can emit: the string constants (or module-level
    constants) in the first argument of each ``.metric(...)`` call under layers/jobsched."""
    names: set[str] = set()
    for path in sorted(RUNTIME.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {
            target.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for target in node.targets
            if isinstance(target, ast.Name) and isinstance(node.value.value, str)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "metric"
            ):
                if not node.args:
                    continue
                for part in ast.walk(node.args[0]):
                    if isinstance(part, ast.Constant) and isinstance(part.value, str):
                        names.add(part.value)
                    elif isinstance(part, ast.Name) and part.id in constants:
                        names.add(constants[part.id])
    return names


def test_the_metric_scanner_finds_what_the_services_emit() -> None:
    assert {
        "Claims",
        "Dispatches",
        "StartLag",
        "Backlog",
        "LeasesRecovered",
        "RecoveryLatency",
    } <= emitted_metrics()
    assert {"Successes", "Failures", "FailedRecords", "PoisonRecords"} <= emitted_metrics()


def test_the_alarms_block_is_what_the_generator_writes() -> None:
    text = find_template().read_text(encoding="utf-8")
    assert alarms.current(text) == alarms.render(), "run python -m jobsched_tools.ops.alarms"


def test_every_generated_alarm_is_in_the_template(template: dict[str, Any]) -> None:
    in_template = set(_resources(template, "AWS::CloudWatch::Alarm"))
    assert in_template == {alarm.logical_id for alarm in alarms.ALARMS}


@pytest.mark.parametrize(
    ("alarm", "namespace", "metric"),
    [
        ("RegistrarIteratorAgeAlarm", "AWS/Lambda", "IteratorAge"),
        ("WorkQueueAgeAlarm", "AWS/SQS", "ApproximateAgeOfOldestMessage"),
        ("DispatchFailuresAlarm", "Jobsched", "DispatchFailures"),
        ("InvalidJobsAlarm", "Jobsched", "InvalidJobs"),
        # issue 27 item 11a: asynchronous invocations Lambda throttled and dropped
        ("TriggerAsyncEventsDroppedAlarm", "AWS/Lambda", "AsyncEventsDropped"),
        ("MissDetectorAsyncEventsDroppedAlarm", "AWS/Lambda", "AsyncEventsDropped"),
    ],
)
def test_the_issue_15_alarms_exist(template: dict[str, Any], alarm: str, namespace: str, metric: str) -> None:
    props = template["Resources"][alarm]["Properties"]
    assert (props["Namespace"], props["MetricName"]) == (namespace, metric)


def test_custom_metric_alarms_watch_metrics_the_code_emits(template: dict[str, Any]) -> None:
    namespace = template["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"]
    service = template["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]
    emitted = emitted_metrics()
    custom = [
        a
        for a in _resources(template, "AWS::CloudWatch::Alarm").values()
        if not a["Properties"]["Namespace"].startswith("AWS/")
    ]
    assert custom
    for alarm in custom:
        props = alarm["Properties"]
        assert props["Namespace"] == namespace
        assert props["MetricName"] in emitted, props["MetricName"]
        assert props["Dimensions"] == [{"Name": "service", "Value": service}]
    assert service == {"Ref": "AWS::StackName"}


def test_every_alarm_has_a_runbook_line() -> None:
    deploy = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    for alarm in alarms.ALARMS:
        assert f"`{alarm.logical_id}`" in deploy, alarm.logical_id


# ---------------------------------------------------------------------------- 3. dashboard


def test_every_dashboard_metric_is_one_the_code_or_aws_emits(template: dict[str, Any]) -> None:
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    emitted = emitted_metrics()
    queues = set(_resources(template, "AWS::SQS::Queue"))
    lines = [
        line
        for widget in dashboard.dashboard_body(template)["widgets"]
        for line in dashboard.metric_lines(widget)
    ]
    assert lines
    for line in lines:
        if line["namespace"] == "AWS/Lambda":
            assert line["metric"] in {"Errors", "Duration", "Throttles", "IteratorAge"}, line
            assert (
                set(line["dimensions"]) == {"FunctionName"}
                and line["dimensions"]["FunctionName"] in FUNCTIONS
            )
        elif line["namespace"] == "AWS/SQS":
            assert line["metric"] in {
                "ApproximateNumberOfMessagesVisible",
                "ApproximateAgeOfOldestMessage",
            }, line
            queue, _, attribute = line["dimensions"]["QueueName"].partition(".")
            assert queue in queues and attribute == "QueueName", line
        else:
            assert line["namespace"] == variables["POWERTOOLS_METRICS_NAMESPACE"], line
            assert line["metric"] in emitted, f"the code emits no metric {line['metric']!r}"
            # ${AWS::StackName} in the !Sub body: the stack's own metrics, as the functions' env.
            assert variables["POWERTOOLS_SERVICE_NAME"] == {"Ref": "AWS::StackName"}
            assert line["dimensions"] == {"service": "AWS::StackName"}, line


def test_the_dashboard_shows_what_the_issue_asks_for(template: dict[str, Any]) -> None:
    shown = {
        (line["namespace"].split("/")[-1], line["metric"], line["stat"])
        for widget in dashboard.dashboard_body(template)["widgets"]
        for line in dashboard.metric_lines(widget)
    }
    names = {(namespace, metric) for namespace, metric, _ in shown}
    for metric in ("Claims", "Dispatches", "Backlog", "LeasesRecovered", "RecoveryLatency"):
        assert ("Jobsched", metric) in names, metric
    for metric in ("MissedRuns", "SkippedRuns", "Failures"):
        assert ("Jobsched", metric) in names, metric
    assert {("Jobsched", "StartLag", "p50"), ("Jobsched", "StartLag", "p99")} <= shown
    assert ("SQS", "ApproximateNumberOfMessagesVisible") in names
    assert ("Lambda", "IteratorAge") in names
    for metric in ("Errors", "Duration", "Throttles"):
        functions = {
            line["dimensions"]["FunctionName"]
            for widget in dashboard.dashboard_body(template)["widgets"]
            for line in dashboard.metric_lines(widget)
            if line["metric"] == metric
        }
        # Not the outcome publisher: it exists only with an outcome bus, and the dashboard's body
        # cannot name a resource that may be absent. Its alarms watch it instead.
        assert functions == set(FUNCTIONS) - {"OutcomePublisherFunction"}, metric


def test_the_dashboard_widgets_do_not_overlap(template: dict[str, Any]) -> None:
    taken: set[tuple[int, int]] = set()
    for widget in dashboard.dashboard_body(template)["widgets"]:
        assert widget["x"] + widget["width"] <= 24
        cells = {
            (x, y)
            for x in range(widget["x"], widget["x"] + widget["width"])
            for y in range(widget["y"], widget["y"] + widget["height"])
        }
        assert not cells & taken, widget["properties"]["title"]
        taken |= cells


def test_the_picture_is_drawn_from_the_body(tmp_path: Any) -> None:
    pytest.importorskip("matplotlib")
    out = dashboard.render(tmp_path / "dashboard.png", minutes=5)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (ROOT / "docs" / "dashboard.png").is_file()
    assert "dashboard.png" in (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")


def test_per_minute_statistics_for_the_picture() -> None:
    samples = [(0, 1.0), (0, 3.0), (0, 2.0), (2, 5.0)]
    assert dashboard._aggregate(samples, "Sum", 3) == [6.0, 0.0, 5.0]
    assert dashboard._aggregate(samples, "Maximum", 3)[0] == 3.0
    assert dashboard._aggregate(samples, "p50", 3)[0] == 2.0
    assert dashboard._aggregate(samples, "p99", 3)[0] == 3.0


# ---------------------------------------------------------------------------- issue 27, item 4


def test_two_stacks_publish_and_read_their_own_metrics() -> None:
    """The runtime's metrics carry the service the stack's environment names, and a stack's
    alarms and dashboard read that service alone: dev's metrics never reach prod's alarms."""
    import json
    import subprocess
    import sys

    probe = (
        "from jobsched.runtime.wiring import metrics, logger, SERVICE;"
        "import json; print(json.dumps([SERVICE, metrics.service, metrics.namespace, logger.service]))"
    )
    seen = {}
    for stack in ("jobsched-dev", "jobsched-prod"):
        env = {
            **__import__("os").environ,
            "POWERTOOLS_SERVICE_NAME": stack,
            "POWERTOOLS_METRICS_NAMESPACE": "Jobsched",
        }
        out = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
        )
        seen[stack] = json.loads(out.stdout)
    assert seen["jobsched-dev"] == ["jobsched-dev", "jobsched-dev", "Jobsched", "jobsched-dev"]
    assert seen["jobsched-prod"][1] == "jobsched-prod"
    template = load_template()
    for alarm in alarms.ALARMS:
        if alarm.namespace == alarms.JOBSCHED:
            dims = template["Resources"][alarm.logical_id]["Properties"]["Dimensions"]
            assert dims == [{"Name": "service", "Value": {"Ref": "AWS::StackName"}}], alarm.logical_id
    body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    assert '"service", "jobsched"' not in body


# ---------------------------------------------------------------------------- issue 27, item 6


def test_the_worker_may_feed_its_own_queue_past_lambda_s_recursion_limit(template: dict[str, Any]) -> None:
    """Retries (max_attempts up to 20) and buffer_one promotions re-send to the queue that
    invokes the worker; Lambda's recursive loop detection stops a chain after 16 invocations
    unless the function's RecursiveLoop is Allow. The other functions keep the default guard
    (Terminate): none of them is invoked by what it sends (the trigger's fan-out is one hop)."""
    from jobsched.core.job import RetryPolicy
    from jobsched_tools.iam.policy import transform

    assert template["Resources"]["WorkerFunction"]["Properties"]["RecursiveLoop"] == "Allow"
    assert RetryPolicy.model_fields["max_attempts"].metadata  # bounded, but above 16:
    assert max(m.le for m in RetryPolicy.model_fields["max_attempts"].metadata if hasattr(m, "le")) > 16
    for function in FUNCTIONS:
        if function != "WorkerFunction":
            assert "RecursiveLoop" not in template["Resources"][function]["Properties"], function
    # SAM passes it through to the AWS::Lambda::Function (aws-sam-translator, offline).
    resources = transform(template)["Resources"]
    assert resources["WorkerFunction"]["Type"] == "AWS::Lambda::Function"
    assert resources["WorkerFunction"]["Properties"]["RecursiveLoop"] == "Allow"
    assert "RecursiveLoop" not in resources["TriggerFunction"]["Properties"]


# ---------------------------------------------------------------------------- issue 27, item 11a


@pytest.mark.parametrize("function", ["TriggerFunction", "MissDetectorFunction"])
def test_a_dropped_asynchronous_invocation_raises_an_alarm(template: dict[str, Any], function: str) -> None:
    """The scheduled functions (and the trigger's fan-out groups) are invoked asynchronously with
    no retry and a 60 s event age: an event Lambda drops (throttled past its age, or failed) is
    counted in AsyncEventsDropped, which an alarm on that function watches."""
    own = template["Resources"][function]["Properties"]
    assert own["EventInvokeConfig"]["MaximumRetryAttempts"] == 0
    watching = [
        props
        for props in (a["Properties"] for a in _resources(template, "AWS::CloudWatch::Alarm").values())
        if props["MetricName"] == "AsyncEventsDropped"
        and props["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
    ]
    assert len(watching) == 1, function
    (alarm,) = watching
    assert (alarm["Namespace"], alarm["Statistic"], alarm["Threshold"]) == ("AWS/Lambda", "Sum", 0)
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["AlarmActions"]["Fn::If"][0] == "HasAlarmTopic"
