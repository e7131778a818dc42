"""Bitext retrieval: find each sentence's translation among all the other side's sentences (as LASER/MTEB).

A data file holds one translation pair per line (``left<TAB>right``, e.g. Tatoeba's ``en<TAB>de``); its
language is the non-English code in its name (``tatoeba-laser-deu-eng`` is German). Every
left sentence retrieves its nearest right sentence by cosine and vice versa; top-1 accuracy ×100 in both
directions. A retrieved sentence whose text equals the gold translation counts as correct (duplicates).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from staticsem.eval.base import Encoder, Evaluator, embed, find_dir, find_file, read_tsv, with_mean
from staticsem.eval.languages import language_of, select

BITEXT_DIRS = ("parallel", "bitext")


class BitextRetrieval(Evaluator):
    """Top-1 translation retrieval in both directions.

    :param data_dir: the data folder (or its ``parallel/`` folder).
    :param files: file names; default every ``*.tsv`` there except training files (``*train*``).
    :param languages: keep only the sets of these languages (ISO 639-1 codes); ``None`` keeps all.
    :returns: ``{stem: mean of both directions, stem/left-right, stem/right-left, "mean"}``.
    """

    name = "bitext"

    def __init__(
        self, data_dir: str | Path, files: Sequence[str] | None = None, languages: Sequence[str] | None = None
    ) -> None:
        super().__init__()
        names = shared_sets(data_dir) if files is None else files
        paths = [find_file(data_dir, name, BITEXT_DIRS) for name in names]
        if languages is not None:
            paths = select(paths, languages, None, self.name)
        self.pairs: dict[str, tuple[list[str], list[str]]] = {}
        for path in paths:
            rows = read_tsv(path, 2)
            self.pairs[path.stem] = ([r[0] for r in rows], [r[1] for r in rows])
            self._record(path, len(rows))
        self.datasets = list(self.pairs)
        self.languages = {s: lang for s in self.datasets if (lang := language_of(s)) is not None}
        self.settings = {"similarity": "cosine", "metric": "top-1 accuracy, mean of both directions"}

    def __call__(self, encoder: Encoder) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for stem, (left, right) in self.pairs.items():
            scores = embed(encoder, left) @ embed(encoder, right).T
            forward = top1(scores, left, right)
            backward = top1(scores.T, right, left)
            metrics[f"{stem}/left-right"], metrics[f"{stem}/right-left"] = forward, backward
            metrics[stem] = (forward + backward) / 2
        return with_mean(metrics, self.datasets)


def shared_sets(data_dir: str | Path) -> list[str]:
    """The names of the data folder's bitext sets: every ``*.tsv`` there but training files (``*train*``)."""
    return [p.name for p in sorted(find_dir(data_dir, BITEXT_DIRS).glob("*.tsv")) if "train" not in p.name]


def top1(scores: np.ndarray, queries: Sequence[str], targets: Sequence[str]) -> float:
    """Accuracy ×100 of each query's best-scoring target being its own (same text counts)."""
    best = scores.argmax(axis=1)
    return float(np.mean([targets[b] == targets[i] for i, b in enumerate(best)]) * 100)
