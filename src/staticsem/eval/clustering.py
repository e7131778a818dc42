"""Clustering: V-measure ×100 of k-means (k = number of gold labels) on the sentence embeddings."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from staticsem.eval.base import Encoder, Evaluator, embed, find_dir, find_file, read_tsv, with_mean

CLUSTERING_DIRS = ("clustering",)


class Clustering(Evaluator):
    """k-means on unit-length embeddings, repeated with ``runs`` seeds; the mean V-measure is reported.

    :param data_dir: the data folder (or its ``clustering/`` folder) holding ``label<TAB>text`` files.
    :param files: file names; default every ``*.tsv`` there.
    :param runs: k-means runs (seeds ``seed .. seed + runs - 1``), one initialisation each.
    :returns: ``{stem: mean V-measure, f"{stem}_std": its spread over runs, "mean": ...}``.
    """

    name = "clustering"

    def __init__(
        self, data_dir: str | Path, files: Sequence[str] | None = None, *, runs: int = 5, seed: int = 0
    ) -> None:
        super().__init__()
        if files is None:
            files = [p.name for p in sorted(find_dir(data_dir, CLUSTERING_DIRS).glob("*.tsv"))]
        self.data: dict[str, tuple[list[str], list[str]]] = {}
        for name in files:
            path = find_file(data_dir, name, CLUSTERING_DIRS)
            rows = read_tsv(path, 2)
            self.data[path.stem] = ([r[0] for r in rows], [r[1] for r in rows])
            self._record(path, len(rows))
        self.datasets = list(self.data)
        self.runs, self.seed = runs, seed
        self.settings = {
            "algorithm": "sklearn KMeans (lloyd, k-means++, n_init=1)",
            "runs": runs,
            "seed": seed,
        }

    def __call__(self, encoder: Encoder) -> dict[str, float]:
        from sklearn.cluster import KMeans
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.metrics import v_measure_score

        metrics: dict[str, float] = {}
        for stem, (labels, texts) in self.data.items():
            vectors = embed(encoder, texts).astype(np.float64)
            k = len(set(labels))
            scores = []
            for run in range(self.runs):
                with warnings.catch_warnings():  # duplicate points (e.g. zero rows) make fewer clusters
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    found = KMeans(n_clusters=k, n_init=1, random_state=self.seed + run).fit_predict(vectors)
                scores.append(100.0 * v_measure_score(labels, found))
            metrics[stem] = float(np.mean(scores))
            metrics[f"{stem}_std"] = float(np.std(scores))
        return with_mean(metrics, self.datasets)
