"""The template's CloudWatch dashboard: its body as data, and a picture of it.

``python -m jobsched_tools.ops.dashboard [out.png] [--synthetic]`` (``--help``: usage, nothing
written) reads ``DashboardBody`` from
template.yaml (the ``!Sub`` string, with each ``${...}`` replaced by its own name), and draws the
widget grid as CloudWatch lays it out (24 columns), each widget with its title and its metrics'
labels.

The ``Jobsched`` curves come from the deterministic chaos simulation (``jobsched_tools.sim``: the
real services on an in-memory store, with crashes, outages and lost messages), aggregated per
simulated minute with each line's statistic. The simulation has no Lambda or SQS, so the ``AWS/*``
widgets say "not simulated" instead of showing invented numbers. ``--synthetic`` draws labelled
synthetic curves everywhere instead (fast; the tests use it).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
from pathlib import Path
from typing import Any

from jobsched_tools.emulator.provision import find_template, load_template

PLACEHOLDER = re.compile(r"\$\{([^}!]+)\}")
Series = dict[str, list[tuple[int, float]]]  # metric name -> (minute, value) samples


def dashboard_body(template: dict[str, Any] | None = None) -> dict[str, Any]:
    """The dashboard body as JSON, ``${Name}`` references kept as the text ``Name``."""
    template = template or load_template()
    dashboards = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    if len(dashboards) != 1:
        raise ValueError(f"expected one AWS::CloudWatch::Dashboard, found {len(dashboards)}")
    source = dashboards[0]["Properties"]["DashboardBody"]["Fn::Sub"]
    body: dict[str, Any] = json.loads(PLACEHOLDER.sub(lambda m: m.group(1), source))
    return body


def metric_lines(widget: dict[str, Any]) -> list[dict[str, Any]]:
    """Each metric of a widget: namespace, name, dimensions and options (no "." shorthand)."""
    lines = []
    for entry in widget["properties"]["metrics"]:
        options = entry[-1] if isinstance(entry[-1], dict) else {}
        parts = entry[:-1] if options else entry
        namespace, name, *dims = parts
        lines.append(
            {
                "namespace": namespace,
                "metric": name,
                "dimensions": dict(zip(dims[0::2], dims[1::2], strict=True)),
                "stat": options.get("stat", "Average"),
                "label": options.get("label", name),
            }
        )
    return lines


def simulate(seed: int = 1, jobs: int = 60, hours: float = 2.0) -> tuple[Series, int, str]:
    """Every Jobsched metric the services emitted in one chaos run, by simulated minute."""
    from jobsched_tools.sim.scenario import ChaosConfig
    from jobsched_tools.sim.world import World

    world = World(ChaosConfig(seed=seed, jobs=jobs, hours=hours))
    report = world.run()
    series: Series = {}
    for at_ms, name, value in world.telemetry.metrics:
        series.setdefault(name, []).append(((at_ms - world.start_ms) // 60_000, value))
    minutes = int(hours * 60) + 30
    verdict = "invariant violations!" if report.invariant_violations else "all invariants held"
    return series, minutes, f"chaos simulation: seed {seed}, {jobs} jobs, {hours:g} h of faults; {verdict}"


def _aggregate(samples: list[tuple[int, float]], stat: str, minutes: int) -> list[float]:
    by_minute: dict[int, list[float]] = {}
    for minute, value in samples:
        by_minute.setdefault(minute, []).append(value)
    out = []
    for minute in range(minutes):
        values = sorted(by_minute.get(minute, []))
        if not values:
            out.append(0.0 if stat == "Sum" else math.nan)
        elif stat == "Sum":
            out.append(sum(values))
        elif stat == "Maximum":
            out.append(values[-1])
        elif stat.startswith("p"):
            out.append(values[min(len(values) - 1, int(len(values) * float(stat[1:]) / 100))])
        else:
            out.append(sum(values) / len(values))
    return out


def _demo_series(minutes: int, rng: random.Random) -> list[float]:
    base = rng.uniform(1, 10)
    spike = rng.randrange(minutes)
    return [
        max(
            0.0,
            base * (1 + 0.3 * math.sin(t / 7 + base))
            + rng.gauss(0, base / 10)
            + (base * 3 if t == spike else 0),
        )
        for t in range(minutes)
    ]


def render(
    out: Path,
    body: dict[str, Any] | None = None,
    minutes: int = 60,
    series: Series | None = None,
    source: str = "SYNTHETIC demo data, layout only",
) -> Path:
    """Draw ``body`` (default: the template's) into ``out``: ``series`` for the Jobsched metrics
    (from ``simulate``), or synthetic curves for every metric when it is None."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    body = body or dashboard_body()
    widgets = body["widgets"]
    rows = max(w["y"] + w["height"] for w in widgets)
    cell = 0.5  # inches per grid unit
    fig = plt.figure(figsize=(24 * cell, rows * cell + 0.8))
    top = rows * cell + 0.8
    rng = random.Random(15)
    for widget in widgets:
        left = widget["x"] * cell
        bottom = top - 0.6 - (widget["y"] + widget["height"]) * cell
        ax = fig.add_axes(
            (
                (left + 0.45) / (24 * cell),
                (bottom + 0.35) / top,
                (widget["width"] * cell - 0.7) / (24 * cell),
                (widget["height"] * cell - 0.85) / top,
            )
        )
        ax.set_title(widget["properties"]["title"], fontsize=9, loc="left")
        for line in metric_lines(widget):
            label = line["label"] if line["stat"] in line["label"] else f"{line['label']} ({line['stat']})"
            if series is None:
                values = _demo_series(minutes, rng)
            elif line["namespace"] == "Jobsched":
                values = _aggregate(series.get(line["metric"], []), line["stat"], minutes)
            else:
                ax.text(0.5, 0.5, f"{line['namespace']}: not simulated", ha="center", transform=ax.transAxes)
                ax.set_xlim(0, minutes)
                ax.set_yticks([])
                break
            ax.plot(range(minutes), values, label=label)
        ax.tick_params(labelsize=6)
        ax.set_xlabel("minutes", fontsize=6)
        if ax.lines:
            ax.legend(fontsize=6, loc="upper left", frameon=False)
    fig.suptitle(f"jobsched dashboard, drawn from template.yaml's DashboardBody ({source})", fontsize=11)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="python -m jobsched_tools.ops.dashboard",
        description=(
            "Draw template.yaml's CloudWatch dashboard as a PNG, with the Jobsched curves of a "
            "two-hour chaos simulation (about a minute)."
        ),
    )
    cli.add_argument(
        "out",
        nargs="?",
        type=Path,
        help="the PNG to write (default: docs/dashboard.png of the repository, which is tracked)",
    )
    cli.add_argument(
        "--synthetic", action="store_true", help="labelled synthetic curves instead of a simulation (fast)"
    )
    return cli


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)  # --help prints and exits here, before anything is written
    out = args.out if args.out is not None else find_template().parent / "docs" / "dashboard.png"
    if args.synthetic:
        print(render(out))
    else:
        series, minutes, source = simulate()
        print(render(out, minutes=minutes, series=series, source=source))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
