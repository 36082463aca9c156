"""The template's CloudWatch dashboard: its body as data, and a picture of it.

``python -m jobsched_tools.ops.dashboard [out.png]`` reads ``DashboardBody`` from template.yaml
(the ``!Sub`` string, with each ``${...}`` replaced by its own name), and draws the widget grid
as CloudWatch lays it out (24 columns), each widget with its title and its metrics' labels. The
curves are SYNTHETIC demo data (the picture says so): this shows the layout, not a measurement.
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
from pathlib import Path
from typing import Any

from jobsched_tools.emulator.provision import find_template, load_template

PLACEHOLDER = re.compile(r"\$\{([^}!]+)\}")


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


def _demo_series(label: str, minutes: int, rng: random.Random) -> list[float]:
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


def render(out: Path, body: dict[str, Any] | None = None, minutes: int = 60) -> Path:
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
            ax.plot(
                range(minutes),
                _demo_series(line["label"], minutes, rng),
                label=f"{line['label']} ({line['stat']})",
            )
        ax.tick_params(labelsize=6)
        ax.set_xlabel("minutes", fontsize=6)
        ax.legend(fontsize=6, loc="upper left", frameon=False)
    fig.suptitle(
        "jobsched dashboard, drawn from template.yaml's DashboardBody (SYNTHETIC demo data, layout only)",
        fontsize=11,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else find_template().parent / "docs" / "dashboard.png"
    print(render(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
