"""Reports of ``run_tasks`` results: a side-by-side table, JSON, and markdown with plots.

Plots use matplotlib's object API (``Figure``), never pyplot, so nothing global is touched.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from rich.table import Table

from staticsem.eval.base import MEAN, require
from staticsem.eval.report_languages import markdown_lines

logger = logging.getLogger(__name__)
MISSING = "—"


def metric_rows(report: dict[str, Any]) -> list[tuple[str, str, list[float | None]]]:
    """``(task, metric, value per model)`` in task order, each task's ``mean`` last."""
    models = list(report["models"].values())
    rows: list[tuple[str, str, list[float | None]]] = []
    for task in report["tasks"]:
        keys: list[str] = []
        for model in models:
            keys += [k for k in model["results"].get(task, {}) if k not in keys]
        keys = [k for k in keys if k != MEAN] + ([MEAN] if MEAN in keys else [])
        for key in keys:
            rows.append((task, key, [m["results"].get(task, {}).get(key) for m in models]))
    return rows


def task_means(report: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """model → task → mean, plus ``average``: the mean over tasks that every model completed."""
    complete = [
        task for task in report["tasks"] if all(task in m["results"] for m in report["models"].values())
    ]
    out: dict[str, dict[str, float | None]] = {}
    for name, model in report["models"].items():
        means: dict[str, float | None] = {
            task: model["results"].get(task, {}).get(MEAN) for task in report["tasks"]
        }
        values = [means[t] for t in complete if means[t] is not None]
        means["average"] = sum(values) / len(values) if values else None  # type: ignore[arg-type]
        out[name] = means
    return out


def _fmt(value: float | None) -> str:
    return MISSING if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


def rich_table(report: dict[str, Any]) -> Table:
    """Every metric of every task, one column per model."""
    table = Table(title="scores (×100)")
    table.add_column("task")
    table.add_column("metric")
    for name in report["models"]:
        table.add_column(name, justify="right")
    previous = None
    for task, key, values in metric_rows(report):
        style = "bold" if key == MEAN else None
        table.add_row(task if task != previous else "", key, *(_fmt(v) for v in values), style=style)
        previous = task
    averages = task_means(report)
    table.add_row(
        "average", "of task means", *(_fmt(averages[n]["average"]) for n in report["models"]), style="bold"
    )
    return table


def _is_secondary(key: str) -> bool:
    return any(part in key for part in ("_coverage", "_std", "_recall@", "_dev"))


def cells(values: list[float | None], bold: bool = True) -> list[str]:
    """A row's values formatted; with ``bold`` and several models, the best one in bold."""
    best = max((v for v in values if v is not None and not math.isnan(v)), default=None)
    return [
        f"**{_fmt(v)}**" if bold and v is not None and v == best and len(values) > 1 else _fmt(v)
        for v in values
    ]


def markdown_table(report: dict[str, Any]) -> str:
    """The full table in markdown; the best value of each score row in bold."""
    names = list(report["models"])
    lines = ["| task | metric | " + " | ".join(names) + " |", "|---|---|" + "---:|" * len(names)]
    for task, key, values in metric_rows(report):
        label = f"**{key}**" if key == MEAN else key
        lines.append(f"| {task} | {label} | " + " | ".join(cells(values, not _is_secondary(key))) + " |")
    averages = task_means(report)
    lines.append(
        "| **average** | of task means | " + " | ".join(_fmt(averages[n]["average"]) for n in names) + " |"
    )
    return "\n".join(lines)


def plot_tasks(report: dict[str, Any], path: Path) -> Path:
    """One panel per task: grouped bars of each dataset's primary score, one colour per model."""
    from matplotlib.figure import Figure

    tasks = [t for t in report["tasks"] if any(t in m["results"] for m in report["models"].values())]
    columns = min(2, len(tasks))
    rows = math.ceil(len(tasks) / columns)
    fig = Figure(figsize=(7 * columns, 3.6 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    names = list(report["models"])
    width = 0.8 / len(names)
    for ax, task in zip(axes, tasks, strict=False):
        datasets = list(report["tasks"][task]["datasets"])
        datasets += [MEAN] if len(datasets) > 1 else []
        for i, name in enumerate(names):
            results = report["models"][name]["results"].get(task, {})
            values = [results.get(d, float("nan")) for d in datasets]
            positions = [x + (i - (len(names) - 1) / 2) * width for x in range(len(datasets))]
            ax.bar(positions, values, width, label=name)
        ax.set_xticks(range(len(datasets)), datasets, rotation=30 if len(datasets) > 4 else 0, ha="right")
        pad = 1.0 if len(datasets) == 1 else 0.0
        ax.set_xlim(-0.5 - pad, len(datasets) - 0.5 + pad)
        ax.set_title(f"{task}: {_unit(task)}")
        ax.set_ylabel("score ×100")
        ax.grid(axis="y", alpha=0.3)
    for ax in axes[len(tasks) :]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=min(len(names), 4), fontsize="small")
    save_figure(fig, path)
    return path


def _unit(task: str) -> str:
    from staticsem.io.eval_reports import TASKS

    return TASKS[task][2] if task in TASKS else "score"


def plot_speed(report: dict[str, Any], path: Path) -> Path | None:
    """Quality (average of task means, and each task's mean) against encoding speed, log x axis."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    speeds = {n: m["speed"]["texts_per_second"] for n, m in report["models"].items() if m.get("speed")}
    if not speeds:
        return None
    means = task_means(report)
    panels = ["average", *report["tasks"]]
    columns = min(4, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig = Figure(figsize=(3.8 * columns, 3.4 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax, panel in zip(axes, panels, strict=False):
        shown = []
        for i, (name, speed) in enumerate(speeds.items()):
            value = means[name].get(panel)
            if value is not None:
                ax.scatter([speed], [value], s=40, color=f"C{i}")
                shown.append(speed)
        ax.set_xscale("log")
        narrow = not shown or max(shown) < 10 * min(shown)
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if narrow else (1.0,)))
        ax.xaxis.set_major_formatter(FuncFormatter(_short_number))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title("average of task means" if panel == "average" else f"{panel} mean", fontsize=10)
        ax.set_xlabel("sentences / second (log)")
        ax.grid(alpha=0.3)
        ax.margins(x=0.2, y=0.2)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    axes[0].set_ylabel("score ×100")
    handles = [Line2D([], [], marker="o", linestyle="", color=f"C{i}") for i in range(len(speeds))]
    fig.legend(handles, list(speeds), loc="outside upper center", ncols=min(len(speeds), 4), fontsize="small")
    save_figure(fig, path)
    return path


def _short_number(value: float, _position: int | None = None) -> str:
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    return f"{value / 1e3:g}k" if value >= 1e3 else f"{value:g}"


def markdown(report: dict[str, Any], plots: dict[str, str], command: str | None = None) -> str:
    """The whole report: models, the full table, plots, data files and settings."""
    out = ["# staticsem evaluation", ""]
    if command:
        out += ["```", command, "```", ""]
    out += [
        f"staticsem {report['staticsem_version']}, seed {report['seed']}, data `{report['data_dir']}`"
        + (f", languages {', '.join(report['languages'])}." if report.get("languages") else "."),
        "",
        "## Models",
        "",
        "| model | kind | source | dims | words | sentences/s |",
        "|---|---|---|---:|---:|---:|",
    ]
    for name, model in report["models"].items():
        info, speed = model["info"], model.get("speed")
        rate = f"{speed['texts_per_second']:,.0f}" if speed else MISSING
        words = f"{info['words']:,}" if info.get("words") else ""
        out.append(
            f"| {name} | {info.get('kind', '')} | `{info.get('source') or info.get('teacher') or ''}` "
            f"| {info.get('dim', '')} | {words} | {rate} |"
        )
    out += ["", "## Scores (×100)", "", markdown_table(report), ""]
    out += markdown_lines(report, cells)
    skipped = [f"- {n}: {t} ({why})" for n, m in report["models"].items() for t, why in m["skipped"].items()]
    if skipped:
        out += ["Not measured:", "", *skipped, ""]
    for title, file in plots.items():
        out += [f"## {title}", "", f"![{title}]({file})", ""]
    out += ["## Data files", "", "| task | file | rows | sha256 |", "|---|---|---:|---|"]
    for task, described in report["tasks"].items():
        for entry in described["files"]:
            out.append(f"| {task} | `{entry['path']}` | {entry['rows']:,} | `{entry['sha256'][:16]}` |")
    out += ["", "## Settings", ""]
    for task, described in report["tasks"].items():
        out.append(f"- **{task}** ({described['primary_metric']}): {json.dumps(described['settings'])}")
    env = ", ".join(f"{k} {v}" for k, v in report["environment"].items())
    speed_note = report.get("speed_texts", {})
    out += [
        "",
        f"Speed: one `encode` call over {speed_note.get('count', 0)} {speed_note.get('source', '')}.",
        "",
    ]
    out += [f"Environment: {env}.", ""]
    return "\n".join(out)


def write_report(
    report: dict[str, Any], json_path: str | Path, *, plots: bool = True, command: str | None = None
) -> dict[str, Path]:
    """Write ``report.json``, ``report.md`` and (with ``plots``) ``report-tasks.png``/``report-speed.png``.

    :returns: kind → path of every file written.
    """
    if plots:
        require("matplotlib")
    json_path = Path(json_path)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {"json": json_path}
    write_text_file(json_path, json.dumps(report, indent=2) + "\n")
    images: dict[str, str] = {}
    if plots:
        tasks_png = plot_tasks(report, json_path.with_name(f"{json_path.stem}-tasks.png"))
        images["Scores per task"] = tasks_png.name
        written["tasks_plot"] = tasks_png
        speed_png = plot_speed(report, json_path.with_name(f"{json_path.stem}-speed.png"))
        if speed_png is not None:
            images["Quality against encoding speed"] = speed_png.name
            written["speed_plot"] = speed_png
    md_path = json_path.with_suffix(".md")
    write_text_file(md_path, markdown(report, images, command))
    written["markdown"] = md_path
    return written


def write_text_file(path: Path, text: str) -> None:
    """Write UTF-8 text atomically."""
    from staticsem.io.atomic import atomic_file

    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def save_figure(fig: Any, path: Path) -> None:
    """Save a matplotlib figure as PNG atomically."""
    from staticsem.io.atomic import atomic_file

    with atomic_file(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
