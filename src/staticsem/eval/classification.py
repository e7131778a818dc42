"""SentEval-style classification: a logistic-regression probe on frozen sentence embeddings.

Datasets are found by file name in the data folder (or its ``classification/`` folder):

* ``NAME-all.tsv``: no official split, so stratified k-fold (default 10); each fold picks the
  regularisation on a stratified 10% of its training part, refits on the whole part and scores the
  held-out fold; the result is the mean fold accuracy.
* ``NAME-train.tsv`` + ``NAME-test.tsv``: C picked on a stratified 10% of train, refit, scored on test.
* ``NAME-train.tsv`` + ``NAME-dev.tsv`` + ``NAME-test.tsv``: C picked on dev, scored on test.

Features are standardised (the embeddings are unit-length, so raw values are tiny); everything is
seeded, so the same embeddings give the same numbers.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.errors import InputError
from staticsem.eval.base import Encoder, Evaluator, embed, find_dir, read_tsv, with_mean

logger = logging.getLogger(__name__)
CLASSIFICATION_DIRS = ("classification",)
SPLITS = ("all", "train", "dev", "test")
Split = tuple[np.ndarray, np.ndarray]  # (labels, features)


class Classification(Evaluator):
    """Accuracy ×100 of a logistic-regression probe per dataset.

    :param data_dir: the data folder (or its ``classification/`` folder) holding ``label<TAB>text`` files.
    :param datasets: dataset names (``mr``, ``trec``, ``sst2``, ...); default every one found.
    :param folds: k for datasets without a split.
    :param c_values: inverse regularisation strengths to choose from.
    :param seed: seed of the folds and held-out splits.
    :returns: ``{name: test accuracy, "sst2_dev": dev accuracy (where a dev split exists), "mean": ...}``.
    :raises InputError: when a dataset has no usable split or fewer than two labels.
    """

    name = "classification"

    def __init__(
        self,
        data_dir: str | Path,
        datasets: Sequence[str] | None = None,
        *,
        folds: int = 10,
        c_values: Sequence[float] = (0.1, 1.0, 10.0),
        seed: int = 0,
    ) -> None:
        super().__init__()
        folder = find_dir(data_dir, CLASSIFICATION_DIRS)
        found: dict[str, dict[str, Path]] = {}
        for path in sorted(folder.glob("*.tsv")):
            dataset, _, split = path.stem.rpartition("-")
            if dataset and split in SPLITS:
                found.setdefault(dataset, {})[split] = path
        names = list(found) if datasets is None else list(datasets)
        self.data: dict[str, dict[str, tuple[list[str], list[str]]]] = {}
        for dataset in names:
            splits = found.get(dataset, {})
            if "all" not in splits and not {"train", "test"} <= set(splits):
                raise InputError(
                    f"classification dataset {dataset!r}: need {dataset}-all.tsv or {dataset}-train.tsv "
                    f"and {dataset}-test.tsv in {folder} (found {sorted(splits) or 'none'})"
                )
            use = ["all"] if "all" in splits else [s for s in ("train", "dev", "test") if s in splits]
            self.data[dataset] = {}
            for split in use:
                rows = read_tsv(splits[split], 2)
                self.data[dataset][split] = ([r[0] for r in rows], [r[1] for r in rows])
                self._record(splits[split], len(rows))
            labels = set(self.data[dataset][use[0]][0])
            if len(labels) < 2:
                raise InputError(f"classification dataset {dataset!r} has {len(labels)} label(s), need 2+")
        self.datasets = list(self.data)
        self.folds, self.c_values, self.seed = folds, tuple(c_values), seed
        self.settings = {
            "probe": "StandardScaler + LogisticRegression(lbfgs, max_iter=2000)",
            "c_values": list(self.c_values),
            "folds": folds,
            "selection": "dev split, else a stratified 10% of train",
            "seed": seed,
        }

    def __call__(self, encoder: Encoder) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for dataset, splits in self.data.items():
            encoded = {
                split: (np.asarray(labels), embed(encoder, texts))
                for split, (labels, texts) in splits.items()
            }
            if "all" in encoded:
                metrics[dataset] = self._kfold(encoded["all"])
            elif "dev" in encoded:
                model, dev = self._select(encoded["train"], encoded["dev"])
                metrics[dataset] = _accuracy(model, encoded["test"])
                metrics[f"{dataset}_dev"] = dev
            else:
                model, _ = self._select(*_holdout(encoded["train"], self.seed))
                metrics[dataset] = _accuracy(_refit(model, encoded["train"]), encoded["test"])
            logger.info("classification %s: %.2f", dataset, metrics[dataset])
        return with_mean(metrics, self.datasets)

    def _kfold(self, data: Split) -> float:
        """Mean accuracy over stratified folds; each fold picks C on a 10% holdout of its training part."""
        from sklearn.model_selection import StratifiedKFold

        labels, features = data
        folds = StratifiedKFold(n_splits=self.folds, shuffle=True, random_state=self.seed)
        scores = []
        for train, test in folds.split(features, labels):
            part = (labels[train], features[train])
            model, _ = self._select(*_holdout(part, self.seed))
            scores.append(_accuracy(_refit(model, part), (labels[test], features[test])))
        return float(np.mean(scores))

    def _select(self, train: Split, dev: Split) -> tuple[Any, float]:
        """Fit one probe per C on ``train``; keep the best on ``dev`` (ties: the first C listed)."""
        best: tuple[Any, float] | None = None
        for c in self.c_values:
            model = _fit(train, c)
            score = _accuracy(model, dev)
            if best is None or score > best[1]:
                best = (model, score)
        assert best is not None
        return best


def _holdout(data: Split, seed: int) -> tuple[Split, Split]:
    from sklearn.model_selection import train_test_split

    labels, features = data
    fit_x, val_x, fit_y, val_y = train_test_split(
        features, labels, test_size=0.1, stratify=labels, random_state=seed
    )
    return (fit_y, fit_x), (val_y, val_x)


def _refit(model: Any, data: Split) -> Any:
    return _fit(data, float(model[-1].C))


def _fit(data: Split, c: float) -> Any:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # convergence notes on degenerate features
        return model.fit(data[1], data[0])


def _accuracy(model: Any, data: Split) -> float:
    return 100.0 * float(np.mean(model.predict(data[1]) == data[0]))
