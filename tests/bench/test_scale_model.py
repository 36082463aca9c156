"""The scale model (issue 18, part 5): its settings fit the template's parameter ranges, TriggerGroups
multiplies the trigger's throughput, and docs/scaling.md's table is the model's output for the
committed bench JSON."""

from __future__ import annotations

import copy
import importlib.util
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from jobsched_tools.bench import scale

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "docs" / "bench-latest.json"


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("scale_model", ROOT / "scripts" / "scale_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return scale.load_template(ROOT / "template.yaml")


@pytest.fixture(scope="module")
def measured() -> scale.Measured:
    return scale.Measured.from_bench(json.loads(BENCH.read_text(encoding="utf-8")))


def _within(spec: dict[str, Any], value: int) -> bool:
    if "AllowedValues" in spec:
        return str(value) in [str(v) for v in spec["AllowedValues"]]
    return int(spec.get("MinValue", value)) <= value <= int(spec.get("MaxValue", value))


def test_every_planned_setting_is_allowed_by_the_template(
    template: dict[str, Any], measured: scale.Measured
) -> None:
    default, _, largest = scale.template_settings(template)
    params = template["Parameters"]
    for target in scale.TARGETS:
        p = scale.plan(measured, target, default, largest)
        for name, value in p.settings.__dict__.items():
            parameter = scale.PARAMETERS[name]
            if parameter in params:
                assert _within(params[parameter], value), (target, parameter, value)
            else:
                assert value == 1, (target, parameter)  # not in this template: one invocation
        if p.reached:
            assert p.runs_per_s >= target


def test_defaults_and_largest_are_the_template_s(template: dict[str, Any]) -> None:
    default, smallest, largest = scale.template_settings(template)
    params = template["Parameters"]
    assert default.shard_count == params["ShardCount"]["Default"]
    assert largest.shard_count == params["ShardCount"]["MaxValue"]
    assert largest.worker_max_concurrency == params["WorkerMaxConcurrency"]["MaxValue"]
    assert largest.trigger_memory_mb == params["TriggerMemorySize"]["MaxValue"]
    assert smallest.worker_batch == params["WorkerBatchSize"]["MinValue"]


def test_trigger_groups_multiply_the_trigger_and_are_read_from_the_template(
    template: dict[str, Any], measured: scale.Measured
) -> None:
    default, _, _ = scale.template_settings(template)
    one = scale.limits(measured, replace(default, trigger_groups=1))
    four = scale.limits(measured, replace(default, trigger_groups=4))
    cpu = "trigger CPU (TriggerGroups x TriggerMemorySize)"
    assert four[cpu] == pytest.approx(4 * one[cpu])
    with_groups = copy.deepcopy(template)
    with_groups["Parameters"]["TriggerGroups"] = {
        "Type": "Number",
        "Default": 3,
        "MinValue": 1,
        "MaxValue": 64,
    }
    default3, _, largest3 = scale.template_settings(with_groups)
    assert (default3.trigger_groups, largest3.trigger_groups) == (3, 64)
    # Fan-out lifts the trigger's limit: at 64 invocations the trigger is no longer first.
    assert scale.rate(measured, largest3)[0] > scale.rate(measured, replace(largest3, trigger_groups=1))[0]


def test_the_trigger_s_cpu_limit_follows_lambda_vcpu_per_memory(
    measured: scale.Measured, template: dict[str, Any]
) -> None:
    default, _, _ = scale.template_settings(template)
    cpu = "trigger CPU (TriggerGroups x TriggerMemorySize)"
    at = {
        mb: scale.limits(measured, replace(default, trigger_memory_mb=mb))[cpu] for mb in (512, 1769, 10240)
    }
    assert at[1769] == pytest.approx(at[512] * 1769 / 512)
    assert at[10240] == pytest.approx(at[1769])  # one Python process: one core at most


def test_the_scaling_doc_table_is_the_model_s_output(
    template: dict[str, Any], measured: scale.Measured
) -> None:
    script = _script()
    doc = (ROOT / "docs" / "scaling.md").read_text(encoding="utf-8")
    assert script.doc_table(doc) == scale.markdown(measured, template), (
        "docs/scaling.md is stale: run `python scripts/scale_model.py --write-doc`"
    )


def test_the_bench_json_carries_the_model_s_headline_figures(
    template: dict[str, Any], measured: scale.Measured
) -> None:
    data = json.loads(BENCH.read_text(encoding="utf-8"))
    default, _, largest = scale.template_settings(template)
    assert data["modelled_runs_per_s_default"] == pytest.approx(scale.rate(measured, default)[0], rel=0.01)
    assert data["modelled_runs_per_s_max"] == pytest.approx(scale.rate(measured, largest)[0], rel=0.01)
