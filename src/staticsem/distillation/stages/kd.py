"""Stage 3a, knowledge distillation: the word table learns to reproduce the teacher's similarity structure.

For a batch of sentences, the student's cosine matrix (mean of word vectors) is pulled towards the
teacher's with the in-batch similarity-distribution loss: the diagonal masked, target
``softmax(S_t / τ)`` per row, cross-entropy of ``log_softmax(S_s / τ)``. Only the V × D table trains
(lazy Adam on sparse gradients by default, ≈ 9× faster than dense Adam at 50k words; ``lazy=False``
for the paper's dense Adam; no weight decay; gradient-norm clip). The dev loss every ``eval_every``
steps keeps the best table and stops training after ``patience`` evaluations without improvement.
With ``group_share`` > 0 part of every batch is neighbour groups (a sentence and its nearest by teacher
embedding), so the loss also ranks near paraphrases against each other, which random batches rarely do;
with ``family_share`` > 0 part is whole edit families (a sentence and its edited copies, ``corpus.edits``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from staticsem.distillation.stages.kd_settings import KDSettings
from staticsem.distillation.stages.training import (
    Objective,
    _Split,
    clip_gradient,
    train_table,
    trainable_table,
    with_table,
)
from staticsem.errors import InputError
from staticsem.model import StaticModel
from staticsem.text import UNKNOWN

__all__ = [
    "Bags",
    "Contrastive",
    "Distillation",
    "KDSettings",
    "Objective",
    "Regression",
    "SentenceTargets",
    "_Split",
    "clip_gradient",
    "info_nce",
    "similarity_loss",
    "train_kd",
    "train_table",
    "trainable_table",
    "with_table",
]


class Bags:
    """Sentences as bags of word rows (inference tokenisation), for ``F.embedding_bag``.

    For a model with subword pieces (``trainable_table``), an unknown word is its pieces' rows (numbered
    from V on), each weighing what the word's composed vector gives it; n-gram vectors are not trained.
    """

    def __init__(self, model: StaticModel, sentences: Sequence[str]) -> None:
        flat, lengths = model._lookup.ids(sentences)
        weights = None
        if model.pieces is not None:
            flat, lengths, weights = _expand_pieces(model, flat, lengths)
        keep = (flat != UNKNOWN) & (flat < len(model) + _piece_rows(model))
        owner = np.repeat(np.arange(len(sentences)), lengths)[keep]
        self.ids = torch.from_numpy(flat[keep])
        self.weights = None if weights is None else torch.from_numpy(weights[keep])
        self.counts = np.bincount(owner, minlength=len(sentences))
        self.starts = np.concatenate([[0], np.cumsum(self.counts)[:-1]])

    def to(self, device: str | torch.device) -> Bags:
        """The bags' ids (and weights) moved to ``device`` once, where the table trains."""
        self.ids = self.ids.to(device)
        self.weights = None if self.weights is None else self.weights.to(device)
        return self

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Flat ids, offsets and (with pieces) the ids' weights of the sentences ``rows`` (on the bags'
        device)."""
        counts = self.counts[rows]
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        # position of every id of the batch in the flat array: its sentence's start + its rank within it
        at = torch.from_numpy(np.repeat(self.starts[rows] - offsets, counts) + np.arange(int(counts.sum())))
        at = at.to(self.ids.device)
        weights = None if self.weights is None else self.weights[at]
        return self.ids[at], torch.from_numpy(offsets).to(self.ids.device), weights

    def pool(self, table: torch.Tensor, rows: np.ndarray, sparse: bool) -> torch.Tensor:
        """Mean word vector of each sentence ``rows`` under ``table`` (with pieces: the weighted sum, the
        same direction as ``encode``'s mean)."""
        ids, offsets, weights = self.batch(rows)
        ids, offsets = ids.to(table.device), offsets.to(table.device)
        if weights is None:
            return F.embedding_bag(ids, table, offsets, mode="mean", sparse=sparse)
        weights = weights.to(table.device)
        return F.embedding_bag(ids, table, offsets, mode="sum", per_sample_weights=weights, sparse=sparse)


def _piece_rows(model: StaticModel) -> int:
    return 0 if model.pieces is None else len(model.pieces.vectors)


def _expand_pieces(
    model: StaticModel, flat: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Composed rows (unknown words, ids >= V) replaced by their pieces' rows (V + piece id), each weighing
    ``scale(k) / k``; word rows weigh 1."""
    assert model.pieces is not None and model._composed is not None
    pieces, composed, words = model.pieces, model._composed, len(model)
    at = np.flatnonzero(flat >= words)
    split = {int(row): pieces.piece_ids(composed.word(int(row))) for row in np.unique(flat[at])}
    sizes = np.ones(len(flat), np.int64)
    sizes[at] = [len(split[int(row)]) for row in flat[at]]
    expanded = np.repeat(flat, sizes)
    weights = np.ones(len(expanded), np.float32)
    if len(at):
        starts = np.cumsum(sizes) - sizes
        inside = np.concatenate([starts[i] + np.arange(sizes[i]) for i in at])
        expanded[inside] = words + np.concatenate([split[int(row)] for row in flat[at]])
        weights[inside] = np.repeat([pieces.scale(int(k)) / k for k in sizes[at]], sizes[at])
    owner = np.repeat(np.arange(len(lengths)), lengths)
    return expanded, np.bincount(owner, weights=sizes, minlength=len(lengths)).astype(np.int64), weights


def similarity_loss(
    student: torch.Tensor,
    teacher: torch.Tensor,
    tau: float,
    whole: float = 0.0,
    pairs: torch.Tensor | None = None,
) -> torch.Tensor:
    """Cross-entropy between the teacher's and the student's in-batch similarity distributions, each row's;
    ``whole`` > 0 adds, at that weight, the same over all the batch's pairs as one distribution (only over
    the pairs ``pairs``, a B × B mask, where given; none left: nothing added)."""
    student, teacher = F.normalize(student, dim=1), F.normalize(teacher, dim=1)
    eye = torch.eye(len(student), dtype=torch.bool, device=student.device)
    scores = (teacher @ teacher.T / tau).masked_fill(eye, float("-inf"))
    student_scores = (student @ student.T / tau).masked_fill(eye, float("-inf"))
    target = torch.softmax(scores, dim=1)
    log_probs = torch.log_softmax(student_scores, dim=1)
    loss = -(target * log_probs.masked_fill(eye, 0.0)).sum(dim=1).mean()
    if not whole:
        return loss
    left = eye if pairs is None else eye | ~pairs  # the pairs the whole-batch term leaves out
    if pairs is not None and bool(left.all()):
        return loss
    left = left.flatten()
    target_pairs = torch.softmax(scores.flatten().masked_fill(left, float("-inf")), dim=0)
    log_pairs = torch.log_softmax(student_scores.flatten().masked_fill(left, float("-inf")), dim=0)
    return loss - whole * (target_pairs * log_pairs.masked_fill(left, 0.0)).sum()


class SentenceTargets(Objective):
    """Sentences (bags of the model's rows), each with a target vector; usable where a word is known."""

    def __init__(self, model: StaticModel, sentences: Sequence[str], targets: np.ndarray) -> None:
        self.bags, self.size = Bags(model, sentences), len(sentences)
        self.targets = torch.from_numpy(np.asarray(targets, dtype=np.float32))

    def usable(self) -> np.ndarray:
        return np.flatnonzero(self.bags.counts > 0)

    def to(self, device: str | torch.device) -> SentenceTargets:
        self.bags.to(device)
        self.targets = self.targets.to(device)
        return self

    def _targets(self, rows: np.ndarray) -> torch.Tensor:
        return self.targets[torch.from_numpy(np.asarray(rows, np.int64)).to(self.targets.device)]


class Distillation(SentenceTargets):
    """Stage 3a: sentence means reproduce the teacher's in-batch similarity distributions."""

    name = "kd"

    def __init__(
        self,
        model: StaticModel,
        sentences: Sequence[str],
        targets: np.ndarray,
        tau: float,
        center: bool = True,
        families: Sequence[np.ndarray] | None = None,
        whole: float = 0.0,
        whole_pairs: str = "all",
    ) -> None:
        if len(targets) != len(sentences):
            raise InputError(f"{len(sentences)} sentences but {len(targets)} teacher embeddings")
        targets = np.asarray(targets, dtype=np.float32)
        super().__init__(model, sentences, targets - targets.mean(axis=0) if center else targets)
        self.tau, self._families, self.whole = tau, families, whole
        # with whole_pairs "families": which sentences belong to an edit family (its pairs are ranked)
        self.in_family: np.ndarray | None = None
        if whole_pairs == "families":
            if not families:
                raise InputError("whole_pairs families needs edit families, which only an SWE build makes")
            self.in_family = np.zeros(len(sentences), bool)
            for family in families or []:
                self.in_family[family] = True

    def families(self) -> Sequence[np.ndarray] | None:
        return self._families

    def directions(self) -> np.ndarray:
        return F.normalize(self.targets, dim=1).cpu().numpy()

    def pairs(self, rows: np.ndarray, device: torch.device) -> torch.Tensor | None:
        """The pairs of the batch ``rows`` that the whole-batch loss ranks (``None``: all)."""
        if self.in_family is None:
            return None
        inside = torch.from_numpy(self.in_family[np.asarray(rows)]).to(device)
        return inside[:, None] | inside[None, :]

    def loss(self, table: torch.Tensor, rows: np.ndarray, sparse: bool) -> torch.Tensor:
        targets = self._targets(rows).to(table.device)
        pooled = self.bags.pool(table, rows, sparse)
        return similarity_loss(pooled, targets, self.tau, self.whole, self.pairs(rows, table.device))

    def batch_losses(self, table: torch.Tensor, batches: Sequence[np.ndarray]) -> list[float]:
        # the sentences of every batch pooled in one call; the in-batch losses on slices of the result. The
        # families' whole-batch term trains only: the dev loss that keeps the table is each row's
        pooled = self.bags.pool(table, np.concatenate(batches), False)
        ends = np.cumsum([len(rows) for rows in batches])
        targets = [self._targets(rows).to(pooled.device) for rows in batches]
        whole = self.whole if self.in_family is None else 0.0
        return [
            similarity_loss(pooled[end - len(rows) : end], target, self.tau, whole).item()
            for rows, end, target in zip(batches, ends, targets, strict=True)
        ]


class Regression(SentenceTargets):
    """Each sentence's mean pointed at a target vector of the model's width (cosine): the language
    alignment's refinement, targets in the teacher's shared space (``stages.align.shared_targets``)."""

    name = "regression"

    def __init__(self, model: StaticModel, sentences: Sequence[str], targets: np.ndarray) -> None:
        if targets.shape != (len(sentences), model.dim):
            raise InputError(f"{len(sentences)} sentences of width {model.dim} but targets {targets.shape}")
        super().__init__(model, sentences, targets)

    def loss(self, table: torch.Tensor, rows: np.ndarray, sparse: bool) -> torch.Tensor:
        pooled = self.bags.pool(table, rows, sparse)
        return (1.0 - F.cosine_similarity(pooled, self._targets(rows).to(table.device), dim=1)).mean()


class Contrastive(Objective):
    """Stage 3b: InfoNCE over parallel pairs, in-batch negatives, both directions (METHOD.md §1)."""

    name = "contrastive"

    def __init__(self, model: StaticModel, left: Sequence[str], right: Sequence[str], tau: float) -> None:
        if len(left) != len(right):
            raise InputError(f"{len(left)} left sentences but {len(right)} right ones")
        self.sides, self.tau, self.size = (Bags(model, left), Bags(model, right)), tau, len(left)

    def usable(self) -> np.ndarray:
        return np.flatnonzero((self.sides[0].counts > 0) & (self.sides[1].counts > 0))

    def to(self, device: str | torch.device) -> Contrastive:
        for side in self.sides:
            side.to(device)
        return self

    def loss(self, table: torch.Tensor, rows: np.ndarray, sparse: bool) -> torch.Tensor:
        left, right = (side.pool(table, rows, sparse) for side in self.sides)
        return info_nce(left, right, self.tau)


def info_nce(left: torch.Tensor, right: torch.Tensor, tau: float) -> torch.Tensor:
    """Cross-entropy against the diagonal of ``norm(left) · norm(right)ᵀ / τ``, in both directions."""
    scores = F.normalize(left, dim=1) @ F.normalize(right, dim=1).T / tau
    labels = torch.arange(len(scores), device=scores.device)
    return (F.cross_entropy(scores, labels) + F.cross_entropy(scores.T, labels)) / 2


def train_kd(
    model: StaticModel,
    sentences: Sequence[str],
    targets: np.ndarray,
    settings: KDSettings = KDSettings(),
    show_progress: bool = True,
) -> tuple[StaticModel, dict[str, float | None]]:
    """Fine-tune ``model``'s table so sentence means reproduce the teacher's similarities.

    :raises InputError: for settings training cannot run with, and for ``whole_pairs="families"``: plain
        sentences have no edit families (the SWE build makes them; ``Distillation`` refuses).
    """
    settings.validate()
    return train_table(
        model,
        [
            Distillation(
                model,
                sentences,
                targets,
                settings.tau,
                settings.center_targets,
                whole=settings.whole_weight,
                whole_pairs=settings.pairs_ranked,
            )
        ],
        settings,
        show_progress,
    )
