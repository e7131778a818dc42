"""Fitting a ``StaticClassifier`` with torch: the word table (or only the head) trained on labelled texts.

The network computes exactly what inference computes with numpy: a text's rows are the ones ``encode``
averages (``StaticModel.row_ids``), summed by an ``nn.EmbeddingBag`` and L2-normalised, standardised with
the training set's mean and spread, then the head. Only rows that occur in the training or dev texts are
trained (a compact copy of the table, written back afterwards), so the rest of the vocabulary keeps its
distilled vectors. AdamW; after every epoch the dev split is scored (accuracy, or micro-F1 for
multi-label) and training stops when it has not improved for ``patience`` epochs; the best epoch's
weights are kept.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from staticsem.errors import InputError
from staticsem.model import StaticModel
from staticsem.train.data import Label, check_known, check_labels, class_list
from staticsem.train.head import Head
from staticsem.train.network import Inputs, Net

logger = logging.getLogger(__name__)


class Fitted(NamedTuple):
    """What training gives ``StaticClassifier`` (its constructor's arguments, in order)."""

    model: StaticModel
    head: Head
    classes: list[str]
    multi_label: bool
    threshold: float
    metadata: dict[str, Any]


@dataclass(frozen=True)
class FitSettings:
    """How a classifier is trained (recorded in its ``classifier.json``).

    :param freeze: keep the word table as it is and train the head only.
    :param hidden: units of one hidden ReLU layer; 0 for a linear head.
    :param multi_label: each text may have any number of labels (sigmoid per class).
    :param class_weights: weigh each class's loss by its inverse frequency (for imbalanced data).
    :param epochs: at most this many passes over the training texts.
    :param patience: stop after this many epochs without a better dev score.
    :param batch_size: texts per step.
    :param lr: AdamW learning rate of the head; ``table_lr`` of the word table.
    :param weight_decay: AdamW weight decay of the head (the table has none).
    :param dropout: dropout on the head's input and hidden layer.
    :param dev_fraction: share of the training texts held out for early stopping when no dev set is given.
    :param threshold: multi-label probability from which a label is predicted.
    :param seed: seed of the dev split, the initial head and the batch order.
    :param threads: torch threads while fitting (each step is small: on a 2-core machine shared with other
        work, 3 epochs of CR took 5.3 s with one thread and 14.1 s with two).
    :param show_progress: show a progress bar over epochs.
    """

    freeze: bool = False
    hidden: int = 512  # chosen on dev accuracy (docs/benchmarks/classification.md), as model2vec's head
    multi_label: bool = False
    class_weights: bool = False
    epochs: int = 30
    patience: int = 3
    batch_size: int = 32
    lr: float = 1e-3
    table_lr: float = 1e-3
    weight_decay: float = 0.01
    dropout: float = 0.1
    dev_fraction: float = 0.1
    threshold: float = 0.5
    seed: int = 0
    threads: int = 1
    show_progress: bool = True

    def __post_init__(self) -> None:
        for name in ("epochs", "patience", "batch_size", "threads"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.hidden < 0:
            raise InputError(f"hidden must be 0 (linear head) or a number of units, got {self.hidden}")
        for name in ("lr", "table_lr"):
            if not getattr(self, name) > 0:
                raise InputError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0.0 <= self.dev_fraction < 1.0 or not 0.0 <= self.dropout < 1.0:
            raise InputError(
                f"dev_fraction ({self.dev_fraction}) and dropout ({self.dropout}) must be in [0, 1)"
            )
        if not 0.0 < self.threshold < 1.0:
            raise InputError(f"threshold must be between 0 and 1, got {self.threshold}")


def fit(
    texts: Sequence[str],
    labels: Sequence[Label],
    model: StaticModel | str | Path,
    *,
    dev: tuple[Sequence[str], Sequence[Label]] | None = None,
    classes: Sequence[str] | None = None,
    settings: FitSettings | None = None,
    **options: Any,
) -> Fitted:
    """Train a classifier on ``model``'s word table (see the module doc; ``options`` are ``FitSettings``).

    :raises InputError: for texts that are not strings, bad labels, fewer than two classes, a class without
        training examples, or dev labels outside the training classes (one line, with the numbers).
    """
    settings = replace(settings or FitSettings(), **options)
    static = _as_model(model)
    texts = _check_texts(texts, "training")
    gold = check_labels(labels, settings.multi_label, len(texts))
    names = class_list(gold, classes, settings.multi_label)
    targets = _targets(gold, names, settings.multi_label)
    if dev is not None:
        dev_texts = _check_texts(dev[0], "dev")
        dev_gold = check_labels(dev[1], settings.multi_label, len(dev_texts))
        check_known(dev_gold, names, "dev")
        train_idx, dev_targets = np.arange(len(texts)), _targets(dev_gold, names, settings.multi_label)
    else:
        train_idx, dev_idx = _split(targets, settings)
        dev_texts, dev_targets = [texts[i] for i in dev_idx], targets[dev_idx]
    if not settings.freeze and static.ngrams is not None:
        raise InputError(
            "fine-tuning a model with an n-gram table (fastText) is not supported; use freeze=True"
        )
    torch.manual_seed(settings.seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    try:
        return _fit(static, texts, train_idx, targets, dev_texts, dev_targets, names, settings)
    finally:
        torch.set_num_threads(threads)


def _fit(
    static: StaticModel,
    texts: list[str],
    train_idx: np.ndarray,
    targets: np.ndarray,
    dev_texts: list[str],
    dev_targets: np.ndarray,
    names: list[str],
    settings: FitSettings,
) -> Fitted:
    train_texts, train_targets = [texts[i] for i in train_idx], targets[train_idx]
    started = time.perf_counter()
    features = static.encode(train_texts, normalize=True)
    mean = features.mean(axis=0)
    scale = np.maximum(features.std(axis=0), 1e-4).astype(np.float32)
    inputs = Inputs(static, train_texts, dev_texts, features, settings.freeze)
    net = Net(inputs.table, mean, scale, len(names), settings.dropout, settings.hidden, inputs.fixed)
    loss_fn = _loss(train_targets, settings)
    best, history = _train(net, inputs, train_targets, dev_targets, loss_fn, settings)
    net.load_state_dict(best)
    head = net.head_numpy()
    tuned = static if settings.freeze else inputs.tuned_model(net)
    metadata = {
        "settings": asdict(settings),
        "train_examples": len(train_texts),
        "dev_examples": len(dev_texts),
        "epochs": len(history),
        "dev_history": history,
        "best_dev": max(history) if history else None,
        "train_seconds": round(time.perf_counter() - started, 2),
        "base_model": static.metadata.get("method"),
    }
    return Fitted(tuned, head, names, settings.multi_label, settings.threshold, metadata)


def _as_model(model: StaticModel | str | Path) -> StaticModel:
    if isinstance(model, StaticModel):
        return model
    from staticsem.io import load

    return load(Path(model))


def _check_texts(texts: Sequence[str], what: str) -> list[str]:
    if isinstance(texts, str):
        raise InputError(f"{what} texts must be a list of strings, not a single string")
    texts = list(texts)
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise InputError(f"{what} text {bad} is a {type(texts[bad]).__name__}, not a str")
    if not texts:
        raise InputError(f"no {what} texts")
    return texts


def _targets(gold: list[list[str]], names: list[str], multi_label: bool) -> np.ndarray:
    index = {name: i for i, name in enumerate(names)}
    if not multi_label:
        return np.array([index[example[0]] for example in gold], dtype=np.int64)
    hot = np.zeros((len(gold), len(names)), dtype=np.float32)
    for row, example in enumerate(gold):
        hot[row, [index[label] for label in example]] = 1.0
    return hot


def _split(targets: np.ndarray, settings: FitSettings) -> tuple[np.ndarray, np.ndarray]:
    """Train and dev indices: ``dev_fraction`` of each class (single-label), or of all texts."""
    rng = np.random.default_rng(settings.seed)
    if settings.dev_fraction == 0.0:
        return np.arange(len(targets)), np.zeros(0, dtype=np.int64)
    groups = (
        [np.arange(len(targets))]
        if settings.multi_label
        else [np.flatnonzero(targets == c) for c in np.unique(targets)]
    )
    dev: list[np.ndarray] = []
    for group in groups:
        take = int(round(settings.dev_fraction * len(group))) if len(group) > 1 else 0
        dev.append(rng.permutation(group)[:take])
    dev_idx = np.sort(np.concatenate(dev))
    return np.setdiff1d(np.arange(len(targets)), dev_idx), dev_idx


def _loss(targets: np.ndarray, settings: FitSettings) -> nn.Module:
    if settings.multi_label:
        positive = targets.sum(axis=0)
        weight = None
        if settings.class_weights:
            weight = torch.from_numpy(
                ((len(targets) - positive) / np.maximum(positive, 1)).astype(np.float32)
            )
        return nn.BCEWithLogitsLoss(pos_weight=weight)
    counts = np.bincount(targets, minlength=int(targets.max()) + 1).astype(np.float32)
    weight = None
    if settings.class_weights:
        weight = torch.from_numpy(len(targets) / (len(counts) * np.maximum(counts, 1)))
    return nn.CrossEntropyLoss(weight=weight)


def _train(
    net: Net,
    inputs: Inputs,
    train_targets: np.ndarray,
    dev_targets: np.ndarray,
    loss_fn: nn.Module,
    settings: FitSettings,
) -> tuple[dict[str, torch.Tensor], list[float]]:
    """Epochs of AdamW with early stopping on the dev score; the best state and each epoch's dev score."""
    groups: list[dict[str, Any]] = [
        {"params": list(net.layers.parameters()), "lr": settings.lr, "weight_decay": settings.weight_decay}
    ]
    if net.table is not None:
        groups.append({"params": list(net.table.parameters()), "lr": settings.table_lr, "weight_decay": 0.0})
    optimizer = torch.optim.AdamW(groups)
    rng = np.random.default_rng(settings.seed)
    y_all = torch.from_numpy(train_targets)
    best_state, best_score, stale, history = copy.deepcopy(net.state_dict()), -np.inf, 0, []
    with _Bar(settings.show_progress, settings.epochs) as bar:
        for epoch in range(settings.epochs):
            net.train()
            order = rng.permutation(len(train_targets))
            for start in range(0, len(order), settings.batch_size):
                idx = order[start : start + settings.batch_size]
                x, offsets = inputs.batch("train", idx)
                optimizer.zero_grad()
                loss = loss_fn(net(x, offsets), y_all[torch.from_numpy(idx)])
                loss.backward()
                optimizer.step()
            if len(dev_targets) == 0:  # nothing to stop on: every epoch is the best so far
                best_state = copy.deepcopy(net.state_dict())
                bar.advance(epoch, None)
                continue
            score = _dev_score(net, inputs, dev_targets, settings)
            history.append(round(score, 4))
            bar.advance(epoch, score)
            if score > best_score:
                best_score, best_state, stale = score, copy.deepcopy(net.state_dict()), 0
            else:
                stale += 1
                if stale >= settings.patience:
                    break
    return best_state, history


@torch.no_grad()
def _dev_score(net: Net, inputs: Inputs, targets: np.ndarray, settings: FitSettings) -> float:
    """Dev accuracy ×100 (multi-label: micro-F1 ×100)."""
    net.eval()
    logits = []
    for start in range(0, len(targets), 4096):
        x, offsets = inputs.batch("dev", np.arange(start, min(start + 4096, len(targets))))
        logits.append(net(x, offsets))
    out = torch.cat(logits).numpy()
    if settings.multi_label:
        guess = 1.0 / (1.0 + np.exp(-out)) >= settings.threshold
        truth = targets > 0.5
        return 100 * 2 * float((guess & truth).sum()) / max(float(guess.sum() + truth.sum()), 1.0)
    return 100 * float((out.argmax(axis=1) == targets).mean())


class _Bar:
    """A rich progress bar over epochs showing the last dev score (or nothing when switched off)."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.enabled, self.total = enabled, total
        self.progress: Any = None
        self.task: Any = None

    def __enter__(self) -> _Bar:
        if self.enabled:
            from rich.progress import Progress

            self.progress = Progress(transient=True)
            self.progress.start()
            self.task = self.progress.add_task("training", total=self.total)
        return self

    def advance(self, epoch: int, score: float | None) -> None:
        logger.info("epoch %d: dev %s", epoch + 1, "-" if score is None else f"{score:.2f}")
        if self.progress is not None and self.task is not None:
            shown = "" if score is None else f" (dev {score:.2f})"
            self.progress.update(self.task, advance=1, description=f"epoch {epoch + 1}{shown}")

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
