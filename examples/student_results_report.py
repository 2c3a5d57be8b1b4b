"""Tables, paper directions and the accuracy-against-latency picture of ``student_results``.

Kept apart from the runs so that the report can be rebuilt from a run folder
(``python -m examples.student_results_report runs/student_results``: ``results.json``, or
``runs.json`` when the run stopped before its latency step) and tested without training anything.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

__all__ = ["directions", "task_table", "write_figure", "write_report"]

METRIC_NAMES = {
    "sst2": "SST-2 dev accuracy (872 sentences)",
    "conll2003": "CoNLL-2003 dev entity F1 (3,250 sentences)",
}
SHORT_METRIC = {"sst2": "SST-2 acc.", "conll2003": "CoNLL-2003 F1"}
DENSE_TWIN = ("minimoe-4l-384h", "minilm-4l-384h")  # paper 002: MiniMoE against the dense model of equal FLOPs


def _mean(records: list[dict], key: str = "value") -> float:
    return statistics.fmean(record[key] for record in records)


def _spread(records: list[dict]) -> float:
    """Sample standard deviation over seeds (0 for one seed)."""
    values = [record["value"] for record in records]
    return statistics.stdev(values) if len(values) > 1 else 0.0


def task_table(task: str, by_model: dict, latency: dict | None) -> str:
    """One Markdown table: every model's metric per seed, mean ± std, share of the teacher's mean, eager latency
    ratio to the teacher and training CPU-minutes (mean over seeds)."""
    teacher = by_model["teacher"]["teacher"]
    teacher_mean = _mean(teacher)
    lines = [
        f"**{METRIC_NAMES[task]}**",
        "",
        "| model | start | per seed | mean ± std | of teacher | latency vs teacher | training CPU-min |",
        "|---|---|---|---|---|---|---|",
    ]
    for model, by_start in by_model.items():
        ratio = "1.00×" if model == "teacher" else "-"
        if latency and model in latency and model != "teacher":
            ratio = f"{latency[model] / latency['teacher']:.2f}×"
        for start, records in by_start.items():
            per_seed = ", ".join(f"{100 * record['value']:.1f}" for record in records)
            lines.append(
                f"| {model} | {'fine-tuned' if model == 'teacher' else start} | {per_seed} | "
                f"{100 * _mean(records):.1f} ± {100 * _spread(records):.1f} | {100 * _mean(records) / teacher_mean:.1f}% | "
                f"{ratio} | {_mean(records, 'cpu_seconds') / 60:.1f} |"
            )
    return "\n".join(lines)


def directions(runs: dict) -> list[str]:
    """Paper 002's claim (MiniMoE at least as good as its dense twin of equal FLOPs) per task and start, said plainly
    with the margin against the seeds' spread."""
    moe, dense = DENSE_TWIN
    lines = []
    for task, by_model in runs.items():
        if moe not in by_model or dense not in by_model:
            continue
        for start in by_model[moe]:
            moe_records, dense_records = by_model[moe][start], by_model[dense][start]
            difference = 100 * (_mean(moe_records) - _mean(dense_records))
            spread = 100 * max(_spread(moe_records), _spread(dense_records))
            if difference >= 0:
                verdict = "holds" if difference > spread else "holds only within the seeds' spread"
            else:
                verdict = "does not hold" if -difference > spread else "does not hold, within the seeds' spread"
            lines.append(
                f"- {SHORT_METRIC[task]}, {start}: MiniMoE 4L;384H {100 * _mean(moe_records):.1f} vs dense "
                f"twin {100 * _mean(dense_records):.1f} ({difference:+.1f} points, largest std "
                f"{spread:.1f}): **{verdict}**."
            )
    return lines


def write_figure(runs: dict, latency: dict, path: Path) -> Path:
    """Metric against eager latency ratio, one point per student and start (mean over seeds, bars: std), one panel
    per task; the teacher at 1.0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(runs)
    figure, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4.5), squeeze=False)
    markers = {"minimoe-4l-384h": "o", "minilm-4l-384h": "s", "minimoe-4l-192h": "^", "teacher": "*"}
    colors = {
        "random init": "tab:gray",
        "teacher init": "tab:blue",
        "teacher init + task distillation": "tab:red",
        "teacher": "black",
    }
    for axis, task in zip(axes[0], tasks):
        for model, by_start in runs[task].items():
            x = latency[model] / latency["teacher"]
            for start, records in by_start.items():
                color = colors["teacher" if model == "teacher" else start]
                axis.errorbar(
                    x,
                    100 * _mean(records),
                    yerr=100 * _spread(records),
                    marker=markers[model],
                    color=color,
                    markersize=10 if model == "teacher" else 7,
                    capsize=3,
                    linestyle="none",
                )
        axis.set_xlabel("eager CPU latency, batch 1 × 128 (teacher = 1)")
        axis.set_ylabel(SHORT_METRIC[task])
        axis.set_title(METRIC_NAMES[task], fontsize=10)
        axis.grid(alpha=0.3)
    handles = [
        plt.Line2D([], [], marker=marker, color="black", linestyle="none", label=name)
        for name, marker in markers.items()
    ]
    handles += [
        plt.Line2D([], [], marker="o", color=color, linestyle="none", label=name)
        for name, color in colors.items()
        if name != "teacher"
    ]
    figure.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0.12, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def write_report(output_dir: Path, runs: dict, latency: dict | None, seeds: list[int]) -> str:
    """``results.md``, ``results.json`` and (with latencies) ``accuracy_vs_latency.png`` in ``output_dir``; the
    tables are printed too."""
    sections = [task_table(task, by_model, latency) for task, by_model in runs.items()]
    found = directions(runs)
    if found:
        sections.append("Paper 002's direction (MiniMoE ≥ its dense twin at equal FLOPs):\n\n" + "\n".join(found))
    if latency:
        sections.append(
            "Eager latency, batch 1 × 128, median of 30 interleaved rounds (ms): "
            + ", ".join(f"{name} {value:.1f}" for name, value in latency.items())
        )
        write_figure(runs, latency, output_dir / "accuracy_vs_latency.png")
    sections.append(
        f"Seeds: {', '.join(map(str, seeds))}. Every value is the final model's (no checkpoint or "
        "setting chosen on a dev set)."
    )
    report = "\n\n".join(sections)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "results.md").write_text(report + "\n")
    (output_dir / "results.json").write_text(
        json.dumps({"runs": runs, "latency_ms": latency, "seeds": seeds}, indent=2) + "\n"
    )
    print(report)
    return report


def main(argv: list[str] | None = None) -> int:
    """Rebuild the report of a run folder."""
    import argparse

    parser = argparse.ArgumentParser(description="Rebuild student_results' tables and picture from a run folder.")
    parser.add_argument("folder", type=Path, help="The recipe's --output_dir.")
    folder = parser.parse_args(argv).folder
    if (folder / "results.json").is_file():
        saved = json.loads((folder / "results.json").read_text())
        runs, latency, seeds = saved["runs"], saved["latency_ms"], saved["seeds"]
    elif (folder / "runs.json").is_file():
        runs, latency = json.loads((folder / "runs.json").read_text()), None
        seeds = sorted({int(path.name.removeprefix("seed-")) for path in folder.glob("*/seed-*")})
    else:
        raise SystemExit(f"{folder}: neither results.json nor runs.json; is it student_results' --output_dir?")
    write_report(folder, runs, latency, seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
