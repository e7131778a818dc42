"""``StaticClassifier``: a staticsem model plus a small head; predicting needs numpy only.

A text's features are the model's ``encode`` row (the L2-normalised mean of its word vectors),
standardised with the training set's mean and spread, then one linear layer (or one hidden ReLU layer
and a linear layer). Softmax gives the class probabilities; multi-label classifiers use a sigmoid per
class and a threshold.

On disk a classifier is a staticsem model folder (so ``staticsem.load`` reads its, possibly fine-tuned,
word table) plus ``head.safetensors`` and ``classifier.json`` (classes, threshold, how it was trained).
No pickle. Fitting lives in ``staticsem.train.fit`` (torch); nothing here imports torch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.errors import InputError, ModelFormatError
from staticsem.io.atomic import atomic_folder, write_tensors
from staticsem.io.common import read_json, read_safetensors
from staticsem.model import StaticModel
from staticsem.train.data import Label, check_known, check_labels
from staticsem.train.head import Head

CLASSIFIER_FILE = "classifier.json"
HEAD_FILE = "head.safetensors"
FORMAT = "staticsem-classifier"
FORMAT_VERSION = 1


def is_classifier(path: Path) -> bool:
    """True when ``path`` is a folder written by ``StaticClassifier.save``."""
    return (Path(path) / CLASSIFIER_FILE).is_file() and (Path(path) / HEAD_FILE).is_file()


@dataclass(frozen=True)
class Prediction:
    """One text's classification: its label (a list of labels for multi-label) and every class's score."""

    label: str | list[str]
    scores: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "scores": self.scores}


@dataclass
class StaticClassifier:
    """A text classifier on a staticsem model.

    :param model: the (possibly fine-tuned) staticsem model whose ``encode`` gives the features.
    :param head: standardisation and dense layers.
    :param classes: class names, one per head output.
    :param multi_label: sigmoid per class and ``threshold`` instead of a softmax over classes.
    :param metadata: how it was trained (settings, dev score, time).
    """

    model: StaticModel
    head: Head
    classes: list[str]
    multi_label: bool = False
    threshold: float = 0.5
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.head.inputs != self.model.dim:
            raise ModelFormatError(
                f"the head takes {self.head.inputs} inputs but the model has {self.model.dim} dims"
            )
        if self.head.outputs != len(self.classes) or len(set(self.classes)) != len(self.classes):
            raise ModelFormatError(
                f"the head has {self.head.outputs} outputs for {len(self.classes)} classes "
                f"({len(set(self.classes))} distinct)"
            )
        if not 0.0 < self.threshold < 1.0:
            raise InputError(f"threshold must be between 0 and 1, got {self.threshold}")

    # ------------------------------------------------------------------ fitting (torch)
    @classmethod
    def fit(
        cls,
        texts: Sequence[str],
        labels: Sequence[Label],
        model: StaticModel | str | Path,
        **options: Any,
    ) -> StaticClassifier:
        """Train a classifier on ``model`` (a ``StaticModel`` or a path); needs torch (``staticsem[train]``).

        Options are ``staticsem.train.fit.FitSettings`` fields (``freeze``, ``hidden``, ``multi_label``,
        ``class_weights``, ...) plus ``dev=(texts, labels)`` and ``classes=[...]``.
        """
        try:
            from staticsem.train.fit import fit
        except ImportError as exc:
            raise InputError(f"{exc}: training a classifier needs `pip install 'staticsem[train]'`") from None
        return cls(*fit(texts, labels, model, **options))

    # ------------------------------------------------------------------ prediction (numpy)
    def features(self, texts: Sequence[str]) -> np.ndarray:
        return self.model.encode(list(texts), normalize=True)

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities, one row per text (rows sum to 1 unless multi-label)."""
        if isinstance(texts, str):
            raise InputError("predict_proba takes a list of texts, not a single string")
        logits = self.head.logits(self.features(texts))
        if self.multi_label:
            return (1.0 / (1.0 + np.exp(-np.clip(logits, -60, 60)))).astype(np.float32)
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        return (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)

    def predict(self, texts: Sequence[str]) -> list[str] | list[list[str]]:
        """The predicted label of each text (multi-label: the list of labels over the threshold)."""
        probs = self.predict_proba(texts)
        if self.multi_label:
            return [
                [c for c, hit in zip(self.classes, row, strict=True) if hit]
                for row in probs >= self.threshold
            ]
        return [self.classes[i] for i in probs.argmax(axis=1)]

    def classify(self, texts: Sequence[str]) -> list[Prediction]:
        """Label and per-class scores of each text: what the CLI and the server show."""
        probs = self.predict_proba(texts)
        out = []
        for row in probs:
            scores = {c: round(float(p), 6) for c, p in zip(self.classes, row, strict=True)}
            if self.multi_label:
                label: str | list[str] = [
                    c for c, p in zip(self.classes, row, strict=True) if p >= self.threshold
                ]
            else:
                label = self.classes[int(np.argmax(row))]
            out.append(Prediction(label, scores))
        return out

    def evaluate(self, texts: Sequence[str], labels: Sequence[Label]) -> dict[str, float]:
        """Accuracy and macro-F1 ×100 (multi-label: exact-match accuracy and micro-F1).

        :raises InputError: for bad labels or labels the classifier has no class for.
        """
        gold = check_labels(labels, self.multi_label, len(texts))
        check_known(gold, self.classes, "evaluation")
        index = {c: i for i, c in enumerate(self.classes)}
        probs = self.predict_proba(texts)
        if self.multi_label:
            truth = np.zeros_like(probs, dtype=bool)
            for row, example in enumerate(gold):
                truth[row, [index[label] for label in example]] = True
            guess = probs >= self.threshold
            tp = float((truth & guess).sum())
            f1 = 2 * tp / max(float(truth.sum() + guess.sum()), 1.0)
            return {"accuracy": 100 * float((truth == guess).all(axis=1).mean()), "micro_f1": 100 * f1}
        truth_ids = np.array([index[example[0]] for example in gold])
        guess_ids = probs.argmax(axis=1)
        return {
            "accuracy": 100 * float((truth_ids == guess_ids).mean()),
            "macro_f1": _macro_f1(truth_ids, guess_ids, len(self.classes)),
        }

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path, dtype: str = "float32") -> Path:
        """Write the model folder plus ``head.safetensors`` and ``classifier.json``, atomically."""
        path = Path(path)
        config = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "classes": self.classes,
            "multi_label": self.multi_label,
            "threshold": self.threshold,
            "metadata": self.metadata,
        }
        with atomic_folder(path, markers=(CLASSIFIER_FILE,), what="classifier") as tmp:
            self.model.save(tmp, dtype=dtype)
            write_tensors(tmp / HEAD_FILE, self.head.tensors())
            text = json.dumps(config, indent=2, ensure_ascii=False)
            (tmp / CLASSIFIER_FILE).write_text(text, encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> StaticClassifier:
        """Read a folder written by ``save``.

        :raises ModelFormatError: for a folder that is not a classifier, or missing or corrupt files.
        """
        from staticsem.io.native import load as load_model

        path = Path(path)
        if not (path / CLASSIFIER_FILE).is_file():
            raise ModelFormatError(f"{path}: not a classifier folder (no {CLASSIFIER_FILE})")
        config = read_json(path / CLASSIFIER_FILE)
        if config.get("format") != FORMAT:
            raise ModelFormatError(
                f"{path / CLASSIFIER_FILE}: format is {config.get('format')!r}, not {FORMAT!r}"
            )
        head = Head.from_tensors(read_safetensors(path / HEAD_FILE, required=("mean", "scale")))
        classes = config.get("classes")
        if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
            raise ModelFormatError(f"{path / CLASSIFIER_FILE}: 'classes' must be a list of strings")
        return cls(
            load_model(path),
            head,
            classes,
            multi_label=bool(config.get("multi_label", False)),
            threshold=float(config.get("threshold", 0.5)),
            metadata=dict(config.get("metadata") or {}),
        )


def _macro_f1(truth: np.ndarray, guess: np.ndarray, classes: int) -> float:
    scores = []
    for c in range(classes):
        tp = float(((truth == c) & (guess == c)).sum())
        size = float((truth == c).sum() + (guess == c).sum())
        if size:
            scores.append(2 * tp / size)
    return 100 * float(np.mean(scores)) if scores else 0.0
