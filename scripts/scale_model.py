"""Scale model: the runs/s jobsched carries at its default and at its largest allowed settings, and
the settings and first limit for 1,000, 10,000 and 100,000 runs/s.

The model itself is ``jobsched_tools.bench.scale`` (the bench adds its two headline figures to its
JSON from the same code). Its inputs: the CPU per run measured by ``jobsched bench --json``
(docs/bench-latest.json), the worker's wait per batch (bench/worker_wait.py) and the write units
per run by table and index (bench/write_units.py), both computed now, and template.yaml's
parameter ranges. ``--write-doc`` replaces the table in docs/scaling.md between its markers, which
a test compares with the model's output.

    python scripts/scale_model.py [--bench docs/bench-latest.json] [--plot docs/scaling.png] [--write-doc]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from jobsched_tools.bench import scale

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "scaling.md"
BEGIN, END = "<!-- scale-model:begin -->", "<!-- scale-model:end -->"


def doc_table(doc: str) -> str:
    """The table between the markers of docs/scaling.md."""
    return doc.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def write_doc(table: str, path: Path = DOC) -> None:
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}", encoding="utf-8")


def plot(m: scale.Measured, template: dict[str, object], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _, _, largest = scale.template_settings(template)
    groups = list(range(1, 257))
    fig, ax = plt.subplots(figsize=(8, 5))
    for memory in (512, 1769):
        rates = [
            scale.rate(m, replace(largest, trigger_groups=g, trigger_memory_mb=memory, shard_count=256))[0]
            for g in groups
        ]
        ax.loglog(groups, rates, label=f"modelled runs/s, trigger at {memory} MB, largest other settings")
    for target in scale.TARGETS:
        ax.axhline(target, color="lightgrey", linewidth=0.6)
    ax.axvline(largest.trigger_groups, color="red", linestyle=":", linewidth=0.8)
    ax.text(largest.trigger_groups * 1.05, 30, "TriggerGroups allowed", color="red", fontsize=8, rotation=90)
    ax.set_xlabel("trigger invocations per tick (TriggerGroups)")
    ax.set_ylabel("runs per second (the lowest limit)")
    ax.set_title("jobsched scale model (measured CPU per run, AWS limits)")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--bench", type=Path, default=ROOT / "docs" / "bench-latest.json")
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "scaling.png")
    parser.add_argument("--write-doc", action="store_true", help="update the table in docs/scaling.md")
    args = parser.parse_args(argv)
    data = json.loads(args.bench.read_text(encoding="utf-8"))
    m = scale.Measured.from_bench(data)
    template = scale.load_template()
    default, _, largest = scale.template_settings(template)
    print(
        f"measured: trigger {m.trigger_cpu_ms_per_run:g} ms CPU per run, "
        f"worker {m.worker_cpu_ms_per_run:g} ms; worker wait {m.worker_wait_s_per_batch:g} s per batch; "
        f"write units per run by table {m.units_by_table}"
    )
    for label, settings in (("defaults", default), ("largest allowed", largest)):
        print(f"\nlimits at the {label} (runs/s):")
        for name, value in sorted(scale.limits(m, settings).items(), key=lambda kv: kv[1]):
            print(f"  {value:>12,.0f}  {name}")
    table = scale.markdown(m, template)
    print("\n" + table)
    if args.write_doc:
        write_doc(table)
        print(f"\nwrote the table into {DOC.relative_to(ROOT)}")
    plot(m, template, args.plot)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
