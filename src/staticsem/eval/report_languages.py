"""The per-language part of the markdown report: a summary of each task's mean over languages, then one
table per language (its monolingual STS, en–X STS and bitext sets, every model side by side).

A set's language is the one its task recorded (``describe()["languages"]``, read from the file name); a
task's score in a language is the mean of its sets in that language. Shown when the report holds sets of
``msts`` or ``xsts`` (reports written before languages were recorded show none).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from staticsem.eval.base import MEAN
from staticsem.eval.languages import ENGLISH

MULTILINGUAL_TASKS = ("msts", "xsts")
WHAT = {  # also the order of the tasks in a language's table: monolingual, then cross-lingual
    "sts": "STS",
    "msts": "STS, monolingual",
    "xsts": "STS, cross-lingual (en–X)",
    "bitext": "bitext retrieval (en–X)",
}
Row = tuple[str, str, list[float | None]]  # task, set (or "mean"), one value per model


def _tasks(report: dict[str, Any]) -> list[str]:
    """The report's tasks, those of ``WHAT`` first in its order."""
    order = list(WHAT)
    return sorted(report["tasks"], key=lambda task: order.index(task) if task in order else len(order))


def sets_by_language(report: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    """language → task → its sets in that language; English first, then the codes in order."""
    found: dict[str, dict[str, list[str]]] = {}
    for task in _tasks(report):
        for dataset, language in (report["tasks"][task].get("languages") or {}).items():
            found.setdefault(language, {}).setdefault(task, []).append(dataset)
    return {language: found[language] for language in sorted(found, key=lambda c: (c != ENGLISH, c))}


def shown(report: dict[str, Any]) -> bool:
    """Whether the report has per-language tables: it holds sets of a multilingual task."""
    return any((report["tasks"].get(task) or {}).get("languages") for task in MULTILINGUAL_TASKS)


def _mean(values: list[float | None]) -> float | None:
    good = [v for v in values if v is not None and not math.isnan(v)]
    return sum(good) / len(good) if good and len(good) == len(values) else None


def language_rows(report: dict[str, Any], tasks: dict[str, list[str]]) -> list[Row]:
    """One language's rows: each set of each task, and the task's mean there when it has several sets."""
    models = list(report["models"].values())
    rows: list[Row] = []
    for task, datasets in tasks.items():
        results = [m["results"].get(task, {}) for m in models]
        rows += [(task, d, [r.get(d) for r in results]) for d in datasets]
        if len(datasets) > 1:
            rows.append((task, MEAN, [_mean([r.get(d) for d in datasets]) for r in results]))
    return rows


def summary_rows(report: dict[str, Any]) -> list[tuple[str, list[str], list[float | None]]]:
    """Per task with languages: its languages and, per model, the mean over them of its language scores
    (none for a model missing a language)."""
    by_language = sets_by_language(report)
    models = list(report["models"].values())
    rows = []
    for task in _tasks(report):
        languages = [language for language, tasks in by_language.items() if task in tasks]
        if not languages:
            continue
        scores = []
        for model in models:
            results = model["results"].get(task, {})
            per_language = [_mean([results.get(d) for d in by_language[lang][task]]) for lang in languages]
            scores.append(_mean(per_language))
        rows.append((task, languages, scores))
    return rows


def markdown_lines(report: dict[str, Any], cells: Callable[[list[float | None]], list[str]]) -> list[str]:
    """The section's markdown (empty when not ``shown``); ``cells(values)`` formats a row's values."""
    if not shown(report):
        return []
    names = list(report["models"])
    head = " | ".join(names) + " |"
    rule = "---:|" * len(names)
    out = [
        "## Per language (×100)",
        "",
        "Each task's score in a language is the mean of its sets in that language; the summary is the mean "
        "over the languages (— where a model lacks one).",
        "",
        f"| task | what | languages | {head}",
        f"|---|---|---|{rule}",
    ]
    for task, languages, scores in summary_rows(report):
        listed = f"{len(languages)}: {' '.join(languages)}" if len(languages) > 1 else languages[0]
        out.append(f"| {task} | {WHAT.get(task, task)} | {listed} | " + " | ".join(cells(scores)) + " |")
    for language, tasks in sets_by_language(report).items():
        out += ["", f"### {language}", "", f"| task | set | {head}", f"|---|---|{rule}"]
        for task, dataset, values in language_rows(report, tasks):
            label = f"**{dataset}**" if dataset == MEAN else dataset
            out.append(f"| {task} | {label} | " + " | ".join(cells(values)) + " |")
    return [*out, ""]
