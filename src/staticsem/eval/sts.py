"""Semantic textual similarity: Spearman ×100 of cosine vs gold, pooled over each whole file (as MTEB).

One difference from MTEB: a text with no known word (a zero row) has cosine 0 with anything here,
while MTEB's ``1 - sklearn.paired_cosine_distances`` gives it 0.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from staticsem.eval.base import (
    Encoder,
    Evaluator,
    embed,
    find_dir,
    spearman100,
    with_mean,
)

STS_DIRS = ("sts",)
ORDER = ("stsb-dev.tsv", "sickr-trial.tsv", "stsb-train.tsv", "sickr-train.tsv")


class STS(Evaluator):
    """Cosine similarity of the two sentences' embeddings against the gold score.

    :param data_dir: the data folder (or its ``sts/`` folder) holding ``score<TAB>sentence1<TAB>sentence2``.
    :param files: file names, looked up in ``data_dir`` and ``data_dir/sts``; default every ``*.tsv``
        there (STS-B dev, SICK-R trial, STS-B train, SICK-R train first).
    :returns: ``{stem: spearman, "mean": mean over files}`` (e.g. ``{"stsb-dev": 82.1, ...}``).
    """

    name = "sts"
    dirs: tuple[str, ...] = STS_DIRS

    def __init__(self, data_dir: str | Path, files: Sequence[str] | None = None) -> None:
        super().__init__()
        if files is None:
            found = [p.name for p in sorted(find_dir(data_dir, self.dirs).glob("*.tsv"))]
            files = [f for f in ORDER if f in found] + [f for f in found if f not in ORDER]
        self.pairs = self._read_pairs(data_dir, files, self.dirs, score_column=0)
        self.datasets = list(self.pairs)
        self.settings = {"similarity": "cosine", "correlation": "spearman, one per file"}

    def sentences(self) -> list[str]:
        """Every distinct sentence of the task, in file order."""
        return list(dict.fromkeys(s for first, second, _ in self.pairs.values() for s in (*first, *second)))

    def __call__(self, encoder: Encoder) -> dict[str, float]:
        texts = self.sentences()
        vectors = embed(encoder, texts)
        row = {t: i for i, t in enumerate(texts)}
        metrics: dict[str, float] = {}
        for stem, (first, second, gold) in self.pairs.items():
            a = vectors[[row[t] for t in first]]
            b = vectors[[row[t] for t in second]]
            metrics[stem] = spearman100(gold, np.einsum("ij,ij->i", a, b))
        return with_mean(metrics, self.datasets)


class CrossLingualSTS(STS):
    """STS whose two sentences are in different languages (``xsts/``: ``score<TAB>en<TAB>de``)."""

    name = "xsts"
    dirs = ("xsts",)
