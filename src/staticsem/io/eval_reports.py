"""The ``staticsem eval`` reports (JSON) in a model folder, read for its model card: this model's scores per
task (the newest report that has the task), and the other models the newest report measured beside it.

Standard library only: the card is written at the end of every distillation.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

# task → (model-index task type, metric type, what the number is); every score is ×100
TASKS = {
    "wordsim": ("word-similarity", "spearman", "Spearman"),
    "analogy": ("word-analogy", "accuracy", "accuracy, covered questions"),
    "sts": ("STS", "cos_sim_spearman", "Spearman"),
    "classification": ("Classification", "accuracy", "accuracy"),
    "retrieval": ("Retrieval", "ndcg_at_10", "nDCG@10"),
    "clustering": ("Clustering", "v_measure", "V-measure"),
    "bitext": ("BitextMining", "accuracy", "top-1 accuracy"),
    "xsts": ("STS", "cos_sim_spearman", "Spearman"),
    "msts": ("STS", "cos_sim_spearman", "Spearman"),
}
_MODEL_FILES = {
    "config.json",
    "vocab.json",
    "tokenizer.json",
    "modules.json",
    "config_sentence_transformers.json",
}


class Scores:
    """This model's ``staticsem eval`` results, from the reports in its folder (per task, the newest)."""

    def __init__(self, results: dict[str, dict[str, Any]], report: dict[str, Any], columns: dict[str, Any]):
        self.results = results  # task → {metric: value, "datasets": the task's datasets in its report}
        self.report, self.columns = report, columns  # the newest report, and its models (this one first)

    @classmethod
    def find(cls, folder: Path, rows: int, dim: int) -> Scores | None:
        """The scores of the model in ``folder`` (``rows`` × ``dim``), or None without a report of it."""
        reports = sorted(_reports(folder), key=lambda item: item[0].stat().st_mtime, reverse=True)
        results: dict[str, dict[str, Any]] = {}
        chosen: tuple[dict[str, Any], dict[str, Any]] | None = None
        for _, report in reports:
            name = _entry(report, folder, rows, dim)
            if name is None:
                continue
            for task, values in report["models"][name]["results"].items():
                datasets = (report["tasks"].get(task) or {}).get("datasets") or []
                results.setdefault(task, {**values, "datasets": datasets})
            if chosen is None:
                chosen = (
                    report,
                    {"this model": report["models"][name]}
                    | {other: entry for other, entry in report["models"].items() if other != name},
                )
        return None if chosen is None else cls(results, *chosen)

    def model_index(self) -> list[dict[str, Any]]:
        """One model-index result per task and dataset: its primary score ×100."""
        out = []
        for task, values in self.results.items():
            kind, metric, _ = TASKS.get(task, (task, "score", "score"))
            for dataset in values["datasets"]:
                value = values.get(dataset)
                if isinstance(value, (int, float)) and math.isfinite(value):
                    out.append(
                        {
                            "task": {"type": kind, "name": task},
                            "dataset": {"name": dataset, "type": dataset},
                            "metrics": [{"type": metric, "value": round(float(value), 2)}],
                        }
                    )
        return out

    def markdown(self) -> list[str]:
        """Each task's mean beside the other models the newest report measured, and the average."""
        names = list(self.columns)
        lines = [
            "## Scores",
            "",
            f"`staticsem eval` (staticsem {self.report.get('staticsem_version')}), scores ×100; the mean "
            "over each task's datasets. The report beside this card has every dataset and the data files' "
            "SHA-256.",
            "",
            "| task | metric | " + " | ".join(names) + " |",
            "|---|---|" + "---:|" * len(names),
        ]
        table = [self.results, *(entry["results"] for entry in list(self.columns.values())[1:])]
        for task in self.results:
            cells = [_score((column.get(task) or {}).get("mean")) for column in table]
            lines.append(f"| {task} | {TASKS.get(task, ('', '', 'score'))[2]} | " + " | ".join(cells) + " |")
        shared = [task for task in self.results if all(task in column for column in table)]
        averages = [_score(_mean([column[t].get("mean") for t in shared])) for column in table]
        lines.append("| **average** | of the task means | " + " | ".join(averages) + " |")
        return [*lines, ""]


def _mean(values: list[Any]) -> float | None:
    good = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return sum(good) / len(good) if good and len(good) == len(values) else None


def _score(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) and math.isfinite(value) else "—"


def _reports(folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The ``staticsem eval`` JSON reports directly in ``folder``."""
    found = []
    for path in folder.glob("*.json"):
        if path.name in _MODEL_FILES or not path.is_file():
            continue
        with path.open("rb") as handle:
            if b'"staticsem_version"' not in handle.read(64):  # write_report puts it first
                continue
        report = _json(path)
        if isinstance(report, dict) and isinstance(report.get("models"), dict) and "tasks" in report:
            found.append((path, report))
    return found


def _entry(report: dict[str, Any], folder: Path, rows: int, dim: int) -> str | None:
    """The report's column of ``model``: its source is this folder (or one of this name), else the one
    static model whose size matches."""
    models = report["models"]
    static = {
        name: entry.get("info") or {}
        for name, entry in models.items()
        if (entry.get("info") or {}).get("kind") != "sentence-transformers"
    }
    for name, info in static.items():
        if info.get("source") and Path(str(info["source"])).name == folder.resolve().name:
            return str(name)
    # an export has one row more than the model it was made from: its [UNK]
    sized = [
        n for n, info in static.items() if info.get("dim") == dim and info.get("words") in (rows, rows - 1)
    ]
    return str(sized[0]) if len(sized) == 1 else None


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
