"""Issue 27, item 7: a stack with no jobs costs at most $2 a month (``idle_usd_per_month``),
per function and in total, at the template's defaults; the miss detector no longer sweeps until
its deadline when there is nothing to watch."""

from __future__ import annotations

import pytest
from jobsched.core.config import SchedulerConfig
from jobsched_tools.bench import idle, units


@pytest.fixture(scope="module")
def figures() -> dict[str, idle.Invocation]:
    return idle.measure(SchedulerConfig(), runs=3)


def test_an_idle_stack_costs_at_most_2_usd_a_month(figures: dict[str, idle.Invocation]) -> None:
    prices, _ = units.load_prices()
    cost = idle.usd_per_month(figures, prices)
    by_function = cost["idle_usd_per_month_by_function"]
    assert set(by_function) == {"trigger", "miss_detector", "worker", "registrar", "outcome_publisher"}
    assert cost["idle_usd_per_month"] == pytest.approx(sum(by_function.values()), abs=1e-3)
    assert 0 < cost["idle_usd_per_month"] <= 2.0, cost
    # The detector was ~57 s of 512 MB a minute (~$16 a month); now one sweep, well under a second.
    assert cost["idle_billed_ms"]["miss_detector"] < 1500
    assert by_function["miss_detector"] < 1.0


def test_the_idle_detector_sweeps_once_and_does_not_sleep(figures: dict[str, idle.Invocation]) -> None:
    sweep = figures["miss_detector"]
    assert sweep.slept_ms == 0
    shards = SchedulerConfig().shard_count
    # One full sweep (both indexes), the next lease lapse and the jobs due: one query a shard each.
    assert sweep.queries == 4 * shards


def test_the_idle_trigger_reads_one_shard_per_group(figures: dict[str, idle.Invocation]) -> None:
    cfg = SchedulerConfig()
    assert figures["trigger_group"].queries == cfg.shard_count // cfg.groups_per_tick
    assert figures["trigger_tick"].invokes == cfg.groups_per_tick - 1


def test_the_idle_stack_all_in_costs_at_most_5_usd_a_month(figures: dict[str, idle.Invocation]) -> None:
    """Issue 35, item 13: with what the stack costs by being there, each part named. The alarms
    are counted from template.yaml at its defaults; the dashboard is off by default; an idle stack
    publishes no zero count (it was Claims, Backlog, LeasesRecovered, ... every minute)."""
    prices, _ = units.load_prices()
    cost = idle.usd_per_month(figures, prices)
    parts = cost["idle_usd_per_month_all_in_parts"]
    assert set(parts) == {"invocations", "alarms", "dashboard", "custom_metrics"}
    assert parts["invocations"] == pytest.approx(cost["idle_usd_per_month"], abs=1e-3)
    assert cost["idle_usd_per_month_all_in"] == pytest.approx(sum(parts.values()), abs=1e-3)
    assert cost["idle_usd_per_month_all_in"] <= 5.0, cost
    counts = cost["idle_usd_per_month_all_in_counts"]
    assert counts["alarms"] == idle.template_resources()["AWS::CloudWatch::Alarm"] >= 16
    assert parts["alarms"] == pytest.approx(counts["alarms"] * prices["cloudwatch"]["alarm_usd_per_month"])
    assert counts["dashboards"] == 0 and parts["dashboard"] == 0
    # Only what an idle minute really counts: the fan-out's group invocations.
    assert cost["idle_custom_metrics"] == ["GroupsInvoked"], cost["idle_custom_metrics"]


def test_the_dashboard_and_the_outcome_alarms_count_when_turned_on() -> None:
    on = idle.template_resources({"DashboardEnabled": "true", "OutcomeEventBusName": "outcomes"})
    off = idle.template_resources()
    assert (off.get("AWS::CloudWatch::Dashboard", 0), on["AWS::CloudWatch::Dashboard"]) == (0, 1)
    assert on["AWS::CloudWatch::Alarm"] == off["AWS::CloudWatch::Alarm"] + 4
