"""Run tasks over several encoders and collect one JSON-ready result (scores, data files, speed, setup)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from staticsem.errors import InputError
from staticsem.eval.base import Encoder, Evaluator, NotApplicable, require
from staticsem.eval.encoders import encoder_info
from staticsem.eval.languages import ENGLISH
from staticsem.version import BUILD_PACKAGES, __version__, environment

logger = logging.getLogger(__name__)
SPEED_TEXTS = 5000
_PACKAGES = ("scipy", *BUILD_PACKAGES, "model2vec")  # the teachers run on onnx / onnxruntime too


Languages = Sequence[str] | None


def _factories() -> dict[str, Callable[[Path, int, Languages], Evaluator]]:
    from staticsem.eval.bitext import BitextRetrieval
    from staticsem.eval.classification import Classification
    from staticsem.eval.clustering import Clustering
    from staticsem.eval.retrieval import Retrieval
    from staticsem.eval.sts import STS, CrossLingualSTS, MultilingualSTS
    from staticsem.eval.wordsim import Analogy, WordSimilarity

    return {
        "wordsim": lambda data, seed, languages: WordSimilarity(data),
        "analogy": lambda data, seed, languages: Analogy(data),
        "sts": lambda data, seed, languages: STS(data, languages=languages),
        "classification": lambda data, seed, languages: Classification(data, seed=seed),
        "retrieval": lambda data, seed, languages: Retrieval(data),
        "clustering": lambda data, seed, languages: Clustering(data, seed=seed),
        "bitext": lambda data, seed, languages: BitextRetrieval(data, languages=languages),
        "xsts": lambda data, seed, languages: CrossLingualSTS(data, languages=languages),
        "msts": lambda data, seed, languages: MultilingualSTS(data, languages=languages),
    }


TASK_NAMES = (
    "wordsim",
    "analogy",
    "sts",
    "classification",
    "retrieval",
    "clustering",
    "bitext",
    "xsts",
    "msts",
)
# tasks whose sets carry no language code: their data (the shared folder's) is English
ENGLISH_TASKS = ("wordsim", "analogy", "classification", "retrieval", "clustering")


def build_tasks(
    data_dir: str | Path,
    tasks: Sequence[str | Evaluator] | None,
    seed: int = 0,
    languages: Languages = None,
) -> list[Evaluator]:
    """Evaluators for ``tasks`` (names or ready evaluators); ``None`` means every task whose data exists.

    :param languages: measure only the sets of these languages (ISO 639-1 codes; ``None``: all); the
        English-only tasks (``ENGLISH_TASKS``) run when ``en`` is among them.
    :raises InputError: for an unknown task name, or missing data of a task asked for by name (or no
        set of it in ``languages``).
    """
    factories = _factories()
    data = Path(data_dir)
    if not data.is_dir():
        raise InputError(f"data folder {data} does not exist")
    built: list[Evaluator] = []
    for task in TASK_NAMES if tasks is None else tasks:
        if isinstance(task, Evaluator):
            built.append(task)
            continue
        if task not in factories:
            raise InputError(f"unknown task {task!r}; choose from {', '.join(TASK_NAMES)}")
        try:
            if task in ENGLISH_TASKS and languages is not None and ENGLISH not in languages:
                raise InputError(f"{task}: its sets are English; add en to --languages to measure it")
            built.append(factories[task](data, seed, languages))
        except InputError as exc:
            if tasks is not None:
                raise
            logger.warning("skipping %s: %s", task, exc)
    if not built:
        raise InputError(f"no task has its data in {data}")
    if tasks is None or not all(isinstance(task, Evaluator) for task in tasks):  # else checked already
        _warn_uncovered(built, languages)
    return built


def _warn_uncovered(tasks: Sequence[Evaluator], languages: Languages) -> None:
    """Log the languages asked for that no task has a set in."""
    covered = {part for task in tasks for language in task.languages.values() for part in language.split("-")}
    covered |= {ENGLISH} if any(task.name in ENGLISH_TASKS for task in tasks) else set()
    missing = [language for language in languages or () if language not in covered]
    if missing:
        logger.warning("no evaluation set in %s", ", ".join(missing))


def measure_speed(encoder: Encoder, texts: Sequence[str]) -> dict[str, float]:
    """Texts per second of one ``encode`` call over ``texts`` (after a small warm-up call)."""
    texts = list(texts)
    encoder.encode(texts[:64])
    start = time.perf_counter()
    encoder.encode(texts)
    seconds = time.perf_counter() - start
    return {"texts": len(texts), "seconds": seconds, "texts_per_second": len(texts) / max(seconds, 1e-9)}


def _speed_texts(tasks: Sequence[Evaluator], data_dir: Path) -> tuple[list[str], str]:
    """Up to ``SPEED_TEXTS`` sentences of the first STS task (else STS-B dev), and where they come from."""
    from staticsem.eval.sts import STS

    sts = next((t for t in tasks if isinstance(t, STS)), None)
    if sts is None:
        try:
            sts = STS(data_dir, files=("stsb-dev.tsv",))
        except InputError:
            return [], ""
    return sts.sentences()[:SPEED_TEXTS], f"{sts.name} sentences, first distinct ones"


def run_tasks(
    encoders: Mapping[str, Encoder],
    data_dir: str | Path,
    tasks: Sequence[str | Evaluator] | None = None,
    *,
    seed: int = 0,
    languages: Languages = None,
    speed: bool = True,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Measure every encoder on every task.

    :param encoders: column name → encoder.
    :param data_dir: the evaluation data folder.
    :param tasks: task names (``TASK_NAMES``) or evaluators; ``None`` runs every task with data.
    :param seed: seed of the classification folds and k-means.
    :param languages: only the sets of these languages (see ``build_tasks``); ``None``: every set.
    :param speed: time encoding of up to 5,000 STS sentences per encoder (for the speed plot).
    :returns: ``{"models": {name: {"results": {task: metrics}, "skipped": ..., "speed": ...}},
        "tasks": {task: files, row counts, settings}, ...}``.
    """
    require("scipy", "sklearn")
    data = Path(data_dir).resolve()
    evaluators = build_tasks(data, tasks, seed, languages)
    texts, source = _speed_texts(evaluators, data) if speed else ([], "")
    report: dict[str, Any] = {
        "staticsem_version": __version__,
        "seed": seed,
        "languages": None if languages is None else list(languages),
        "data_dir": str(data),
        "environment": environment(_PACKAGES),
        "tasks": {t.name: _relative(t.describe(), data) for t in evaluators},
        "speed_texts": {"count": len(texts), "source": source},
        "models": {},
    }
    steps = [(name, task) for name in encoders for task in evaluators]
    with _progress(show_progress) as progress:
        bar = progress.add_task("evaluating", total=len(steps) + (len(encoders) if texts else 0))
        for name, encoder in encoders.items():
            entry: dict[str, Any] = {
                "info": encoder_info(encoder),
                "results": {},
                "skipped": {},
                "seconds": {},
            }
            report["models"][name] = entry
            if texts:
                progress.update(bar, description=f"{name}: speed")
                entry["speed"] = measure_speed(encoder, texts)
                progress.advance(bar)
            for task in evaluators:
                progress.update(bar, description=f"{name}: {task.name}")
                start = time.perf_counter()
                try:
                    entry["results"][task.name] = task(encoder)
                except NotApplicable as exc:
                    entry["skipped"][task.name] = str(exc)
                    logger.info("%s: %s skipped (%s)", name, task.name, exc)
                entry["seconds"][task.name] = round(time.perf_counter() - start, 2)
                progress.advance(bar)
    return report


def _relative(described: dict[str, Any], data: Path) -> dict[str, Any]:
    for entry in described["files"]:
        path = Path(entry["path"]).resolve()
        if path.is_relative_to(data):
            entry["path"] = str(path.relative_to(data))
    return described


def _progress(enabled: bool) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not enabled,
        transient=True,
    )
