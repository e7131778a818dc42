"""Stage 3a, knowledge distillation: the word table learns to reproduce the teacher's similarity structure.

For a batch of sentences, the student's cosine matrix (mean of word vectors) is pulled towards the
teacher's with the in-batch similarity-distribution loss: the diagonal masked, target
``softmax(S_t / τ)`` per row, cross-entropy of ``log_softmax(S_s / τ)``. Only the V × D table trains
(lazy Adam on sparse gradients by default, ≈ 9× faster than dense Adam at 50k words; ``lazy=False``
for the paper's dense Adam; no weight decay; gradient-norm clip). The dev loss every ``eval_every``
steps keeps the best table and stops training after ``patience`` evaluations without improvement.
With ``group_share`` > 0 part of every batch is neighbour groups (a sentence and its nearest by teacher
embedding), so the loss also ranks near paraphrases against each other, which random batches rarely do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from staticsem.distillation.stages.kd_settings import KDSettings
from staticsem.errors import InputError
from staticsem.model import StaticModel
from staticsem.pieces import PieceTable
from staticsem.text import UNKNOWN

logger = logging.getLogger(__name__)
POOL_STEPS = 20  # steps that draw neighbour groups from one pool


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

    def batch(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Flat ids, offsets and (with pieces) the ids' weights of the sentences ``rows``."""
        counts = self.counts[rows]
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        # position of every id of the batch in the flat array: its sentence's start + its rank within it
        at = torch.from_numpy(np.repeat(self.starts[rows] - offsets, counts) + np.arange(int(counts.sum())))
        return self.ids[at], torch.from_numpy(offsets), None if self.weights is None else self.weights[at]

    def pool(self, table: torch.Tensor, rows: np.ndarray, sparse: bool) -> torch.Tensor:
        """Mean word vector of each sentence ``rows`` under ``table`` (with pieces: the weighted sum, the
        same direction as ``encode``'s mean)."""
        ids, offsets, weights = self.batch(rows)
        if weights is None:
            return F.embedding_bag(ids, table, offsets, mode="mean", sparse=sparse)
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


def trainable_table(model: StaticModel) -> np.ndarray:
    """The rows distillation trains: the word rows, then (with subword pieces) the piece rows."""
    words = np.asarray(model.vectors, dtype=np.float32)
    if model.pieces is None:
        return np.array(words)
    return np.vstack([words, model.pieces.vectors.astype(np.float32)])


def with_table(model: StaticModel, table: np.ndarray, metadata: dict) -> StaticModel:
    """``model`` with its word (and piece) rows replaced by ``table``'s."""
    words = len(model)
    pieces = None if model.pieces is None else PieceTable(table[words:], model.tokenizer, model.pieces.weight)
    return StaticModel(
        model.vocab,
        np.ascontiguousarray(table[:words]),
        tokenizer=model.tokenizer,
        pieces=pieces,
        metadata=metadata,
        splitter=model.splitter.name,
    )


def similarity_loss(student: torch.Tensor, teacher: torch.Tensor, tau: float) -> torch.Tensor:
    """Cross-entropy between the teacher's and the student's in-batch similarity distributions."""
    student, teacher = F.normalize(student, dim=1), F.normalize(teacher, dim=1)
    eye = torch.eye(len(student), dtype=torch.bool)
    target = torch.softmax((teacher @ teacher.T / tau).masked_fill(eye, float("-inf")), dim=1)
    log_probs = torch.log_softmax((student @ student.T / tau).masked_fill(eye, float("-inf")), dim=1)
    return -(target * log_probs.masked_fill(eye, 0.0)).sum(dim=1).mean()


def clip_gradient(table: torch.nn.Parameter, limit: float) -> None:
    """Scale the (dense or sparse) gradient of ``table`` to a norm of at most ``limit``."""
    grad = table.grad
    if grad is None:
        return
    if grad.is_sparse:
        grad = grad.coalesce()
        norm = grad.values().norm()
        if norm > limit:
            table.grad = torch.sparse_coo_tensor(grad.indices(), grad.values() * (limit / norm), grad.shape)
        else:
            table.grad = grad
    else:
        torch.nn.utils.clip_grad_norm_([table], limit)


class Objective:
    """One training signal: ``size`` examples, a loss over a batch of them, and which are usable."""

    name = ""
    size = 0

    def usable(self) -> np.ndarray:
        """Indices of the examples that have known words."""
        raise NotImplementedError

    def loss(self, table: torch.Tensor, rows: np.ndarray, sparse: bool) -> torch.Tensor:
        """The loss of the examples ``rows`` under the word table ``table``."""
        raise NotImplementedError

    def batch_losses(self, table: torch.Tensor, batches: Sequence[np.ndarray]) -> list[float]:
        """The loss of each batch of examples (no gradient; the dev loss)."""
        return [self.loss(table, rows, False).item() for rows in batches]

    def directions(self) -> np.ndarray | None:
        """Unit vectors whose cosines say which examples are neighbours (None: no neighbour groups)."""
        return None


class Distillation(Objective):
    """Stage 3a: sentence means reproduce the teacher's in-batch similarity distributions."""

    name = "kd"

    def __init__(
        self,
        model: StaticModel,
        sentences: Sequence[str],
        targets: np.ndarray,
        tau: float,
        center: bool = True,
    ) -> None:
        if len(targets) != len(sentences):
            raise InputError(f"{len(sentences)} sentences but {len(targets)} teacher embeddings")
        self.bags, self.tau, self.size = Bags(model, sentences), tau, len(sentences)
        targets = np.asarray(targets, dtype=np.float32)
        self.targets = torch.from_numpy(targets - targets.mean(axis=0) if center else targets)

    def usable(self) -> np.ndarray:
        return np.flatnonzero(self.bags.counts > 0)

    def directions(self) -> np.ndarray:
        return F.normalize(self.targets, dim=1).numpy()

    def loss(self, table: torch.Tensor, rows: np.ndarray, sparse: bool) -> torch.Tensor:
        return similarity_loss(self.bags.pool(table, rows, sparse), self.targets[rows], self.tau)

    def batch_losses(self, table: torch.Tensor, batches: Sequence[np.ndarray]) -> list[float]:
        # the sentences of every batch pooled in one call; the in-batch losses on slices of the result
        pooled = self.bags.pool(table, np.concatenate(batches), False)
        ends = np.cumsum([len(rows) for rows in batches])
        return [
            similarity_loss(pooled[end - len(rows) : end], self.targets[rows], self.tau).item()
            for rows, end in zip(batches, ends, strict=True)
        ]


class Contrastive(Objective):
    """Stage 3b: InfoNCE over parallel pairs, in-batch negatives, both directions (METHOD.md §1)."""

    name = "contrastive"

    def __init__(self, model: StaticModel, left: Sequence[str], right: Sequence[str], tau: float) -> None:
        if len(left) != len(right):
            raise InputError(f"{len(left)} left sentences but {len(right)} right ones")
        self.sides, self.tau, self.size = (Bags(model, left), Bags(model, right)), tau, len(left)

    def usable(self) -> np.ndarray:
        return np.flatnonzero((self.sides[0].counts > 0) & (self.sides[1].counts > 0))

    def loss(self, table: torch.Tensor, rows: np.ndarray, sparse: bool) -> torch.Tensor:
        left, right = (side.pool(table, rows, sparse) for side in self.sides)
        return info_nce(left, right, self.tau)


def info_nce(left: torch.Tensor, right: torch.Tensor, tau: float) -> torch.Tensor:
    """Cross-entropy against the diagonal of ``norm(left) · norm(right)ᵀ / τ``, in both directions."""
    scores = F.normalize(left, dim=1) @ F.normalize(right, dim=1).T / tau
    labels = torch.arange(len(scores))
    return (F.cross_entropy(scores, labels) + F.cross_entropy(scores.T, labels)) / 2


def train_kd(
    model: StaticModel,
    sentences: Sequence[str],
    targets: np.ndarray,
    settings: KDSettings = KDSettings(),
    show_progress: bool = True,
) -> tuple[StaticModel, dict[str, float]]:
    """Fine-tune ``model``'s table so sentence means reproduce the teacher's similarities."""
    return train_table(
        model,
        [Distillation(model, sentences, targets, settings.tau, settings.center_targets)],
        settings,
        show_progress,
    )


class _Split:
    """An objective's train/dev split and its endless stream of shuffled train batches."""

    def __init__(self, objective: Objective, settings: KDSettings, rng: np.random.Generator) -> None:
        usable = objective.usable()
        if len(usable) < 4 * settings.batch_size:
            raise InputError(
                f"{objective.name} training needs at least {4 * settings.batch_size} examples with "
                f"known words, got {len(usable)}"
            )
        usable = rng.permutation(usable)
        dev_size = min(settings.dev_size, len(usable) // 10)
        self.objective, self.dev, self.train = objective, usable[:dev_size], usable[dev_size:]
        self.rng, self.size, self.order, self.at = rng, settings.batch_size, np.empty(0, np.int64), 0
        self.group_size, self.pool = settings.group_size, min(settings.group_pool, len(self.train))
        self.groups = int(settings.group_share * settings.batch_size) // max(1, settings.group_size)
        self.unit = objective.directions() if self.groups and settings.group_size > 1 else None
        self.pool_age, self.pool_rows, self.pool_unit = 0, np.empty(0, np.int64), np.empty((0, 0), np.float32)

    def next_batch(self) -> np.ndarray:
        if self.unit is not None:
            return self.grouped_batch()
        return self.random_rows(self.size)

    def random_rows(self, count: int) -> np.ndarray:
        if self.at + count > len(self.order):
            self.order, self.at = self.rng.permutation(self.train), 0
        self.at += count
        return self.order[self.at - count : self.at]

    def grouped_batch(self) -> np.ndarray:
        """``groups`` seeds with their nearest neighbours in the current pool, the rest random."""
        assert self.unit is not None
        if self.pool_age % POOL_STEPS == 0:  # a fresh random pool (gathering it costs more than a step)
            self.pool_rows = self.train[self.rng.choice(len(self.train), self.pool, replace=False)]
            self.pool_unit = self.unit[self.pool_rows]
        self.pool_age += 1
        seeds = self.random_rows(self.groups)
        cosines = self.unit[seeds] @ self.pool_unit.T
        cosines[self.pool_rows[None, :] == seeds[:, None]] = -2.0  # a seed is not its own neighbour
        nearest = np.argpartition(-cosines, self.group_size - 2, axis=1)[:, : self.group_size - 1]
        rows = np.unique(np.concatenate([seeds, self.pool_rows[nearest].ravel()]))
        return np.unique(np.concatenate([rows, self.random_rows(self.size - len(rows))]))

    def dev_loss(self, table: torch.Tensor) -> float:
        parts = [self.dev[i : i + self.size] for i in range(0, len(self.dev), self.size)]
        return float(np.mean(self.objective.batch_losses(table, [p for p in parts if len(p) > 1])))


def train_table(
    model: StaticModel,
    objectives: Sequence[Objective],
    settings: KDSettings = KDSettings(),
    show_progress: bool = True,
) -> tuple[StaticModel, dict[str, float]]:
    """Fine-tune ``model``'s table on the sum of ``objectives`` (one batch of each per step).

    The summed dev loss every ``eval_every`` steps keeps the best table; training stops after
    ``patience`` evaluations without improvement or at ``max_steps``.

    :raises InputError: when an objective has too few usable examples for a train and a dev split.
    """
    if not objectives:
        raise InputError("no training objective given")
    rng = np.random.default_rng(settings.seed)
    splits = [_Split(objective, settings, rng) for objective in objectives]
    torch.manual_seed(settings.seed)
    table = torch.nn.Parameter(torch.from_numpy(trainable_table(model)))
    optimiser: torch.optim.Optimizer = (
        torch.optim.SparseAdam([table], lr=settings.lr)
        if settings.lazy
        else torch.optim.Adam([table], lr=settings.lr)
    )

    def dev_loss(scored: torch.Tensor) -> float:
        with torch.no_grad():
            return sum(split.dev_loss(scored) for split in splits)

    scored = table.detach().clone() if settings.average else table
    best, best_table, stale, step = dev_loss(scored), table.detach().clone(), 0, 0
    initial, started = best, time.perf_counter()
    progress = tqdm(
        total=settings.max_steps, desc="training", unit=" step", disable=not show_progress, mininterval=2
    )
    while step < settings.max_steps and stale < settings.patience:
        optimiser.zero_grad()
        loss = sum(split.objective.loss(table, split.next_batch(), settings.lazy) for split in splits)
        assert isinstance(loss, torch.Tensor)
        loss.backward()
        clip_gradient(table, settings.clip)
        optimiser.step()
        step += 1
        progress.update(1)
        if step % settings.eval_every == 0:
            if settings.average:
                scored.mul_(settings.average).add_(table.detach(), alpha=1.0 - settings.average)
            current = dev_loss(scored)
            if current < best:
                best, best_table, stale = current, scored.detach().clone(), 0
            else:
                stale += 1
            progress.set_postfix(dev=f"{current:.4f}", best=f"{best:.4f}")
    progress.close()
    stats: dict[str, float] = {
        "steps": step,
        "dev_loss_start": initial,
        "dev_loss_best": best,
        **{f"{s.objective.name}_train": len(s.train) for s in splits},
        **{f"{s.objective.name}_dev": len(s.dev) for s in splits},
        "seconds": round(time.perf_counter() - started, 1),
    }
    logger.info("training (%s): %s", "+".join(s.objective.name for s in splits), stats)
    metadata = {**model.metadata, "kd": {**asdict(settings), **stats}}
    return with_table(model, best_table.numpy(), metadata), stats
