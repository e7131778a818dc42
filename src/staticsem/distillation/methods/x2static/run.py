"""X2Static (Gupta & Jaggi, ACL 2021; METHOD.md §2): CBOW with negative sampling against teacher contexts.

Each vocabulary word w of a sentence S is a target; its context is the mean of the teacher's last-layer
states over S (``contexts.py``). The word table U (V × teacher width, initialised uniform ±1/d) learns
``log(1 + e^(−c·u_w)) + Σ_n log(1 + e^(c·u_n))`` over ``negatives`` words drawn ∝ count^0.5, with
frequent targets sub-sampled (keep √(t/f) + t/f), scores clamped to ±20, lazy (sparse) Adam.

Steps (vocabulary, contexts, training) are checkpointed in the work folder like the SWE pipeline;
training saves the table and the Adam moments every few minutes and resumes at the next chunk.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.numpy import load_file
from tqdm.auto import tqdm

from staticsem.distillation.checkpoint import ChunkStore, fingerprint
from staticsem.distillation.method import Frame
from staticsem.distillation.methods.x2static.settings import X2StaticSettings
from staticsem.distillation.stages.contexts import extract_contexts, groups
from staticsem.distillation.steps import StepRun, run_in_frame
from staticsem.distillation.teachers.backends import backend_key
from staticsem.io import load
from staticsem.io.atomic import save_tensors
from staticsem.model import StaticModel

logger = logging.getLogger(__name__)


class Sampler:
    """Target sub-sampling and negative drawing from corpus counts."""

    def __init__(self, counts: np.ndarray, tokens: int, subsample: float) -> None:
        frequency = counts / max(tokens, 1)
        ratio = subsample / np.maximum(frequency, 1e-12)
        self.keep = np.minimum(1.0, np.sqrt(ratio) + ratio)
        weights = np.sqrt(counts.astype(np.float64))
        self.cumulative = np.cumsum(weights / weights.sum())

    def targets(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Mask of the occurrences kept as targets."""
        return rng.random(len(ids)) < self.keep[ids]

    def negatives(self, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
        """Word ids drawn ∝ count^0.5."""
        draws = np.searchsorted(self.cumulative, rng.random(shape), side="right")
        return np.minimum(draws, len(self.cumulative) - 1)


def _spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Flat positions of the spans ``starts[i] .. starts[i] + lengths[i]``, one after the other."""
    before = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.repeat(starts - before, lengths) + np.arange(int(lengths.sum()))


def negative_sampling_loss(rows: torch.Tensor, contexts: torch.Tensor) -> torch.Tensor:
    """Mean over targets of log(1 + e^(−c·u_w)) + Σ log(1 + e^(c·u_n)), scores clamped to ±20.

    ``rows[i, 0]`` is target i's vector u_w, ``rows[i, 1:]`` its negatives' vectors u_n; ``contexts[i]`` is c.
    """
    scores = torch.einsum("nh,nkh->nk", contexts, rows).clamp(-20.0, 20.0)
    return (F.softplus(-scores[:, 0]) + F.softplus(scores[:, 1:]).sum(dim=1)).mean()


class LazyAdam:
    """Adam that moves only the table rows a step touches: ``torch.optim.SparseAdam``'s update rule.

    SparseAdam spends about three quarters of an X2Static step on sparse-tensor bookkeeping
    (``sparse_mask``, ``coalesce``) over the whole table; gathering the touched rows and writing them back
    gives the same update several times faster (``tests/test_x2static.py`` checks it against SparseAdam).
    """

    def __init__(self, table: torch.Tensor, lr: float, betas: tuple[float, float] = (0.9, 0.999)) -> None:
        self.table, self.lr, self.betas, self.eps = table, lr, betas, 1e-8
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(table), torch.zeros_like(table)
        self.steps = 0

    @torch.no_grad()
    def step(self, ids: torch.Tensor, grads: torch.Tensor) -> None:
        """Apply the gradient ``grads[i]`` of table row ``ids[i]`` (rows given twice add up)."""
        rows, inverse = torch.unique(ids, return_inverse=True)
        grad = torch.zeros(len(rows), grads.shape[1], dtype=grads.dtype).index_add_(0, inverse, grads)
        (beta1, beta2), self.steps = self.betas, self.steps + 1
        mean = self.exp_avg.index_select(0, rows).lerp_(grad, 1 - beta1)
        square = self.exp_avg_sq.index_select(0, rows).mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        self.exp_avg.index_copy_(0, rows, mean)
        self.exp_avg_sq.index_copy_(0, rows, square)
        size = self.lr * math.sqrt(1 - beta2**self.steps) / (1 - beta1**self.steps)
        self.table.index_add_(0, rows, mean.div_(square.sqrt_().add_(self.eps)), alpha=-size)


class Trainer:
    """One table, its lazy Adam, and a resumable position (epoch, chunk) saved in ``state``."""

    def __init__(self, vocab_size: int, width: int, settings: X2StaticSettings, state: Path) -> None:
        self.settings, self.state = settings, state
        generator = torch.Generator().manual_seed(settings.seed)
        self.table = (torch.rand(vocab_size, width, generator=generator) * 2 - 1) / width
        self.optimiser = LazyAdam(self.table, settings.lr)
        self.position = (0, 0)
        self.loss_sum, self.loss_count = 0.0, 0
        if state.is_file():
            self._restore(load_file(str(state)))

    def _restore(self, saved: dict[str, np.ndarray]) -> None:
        self.table.copy_(torch.from_numpy(saved["table"]))
        if "exp_avg" in saved:
            self.optimiser.exp_avg.copy_(torch.from_numpy(saved["exp_avg"]))
            self.optimiser.exp_avg_sq.copy_(torch.from_numpy(saved["exp_avg_sq"]))
            self.optimiser.steps = int(saved["step"][0])
        epoch, chunk, _ = (int(v) for v in saved["position"])  # its third value repeats "step"
        self.position = (epoch, chunk)
        logger.info("resuming X2Static training at epoch %d, chunk %d", epoch + 1, chunk)

    @property
    def steps(self) -> int:
        """Optimiser steps taken so far, resumed runs included."""
        return self.optimiser.steps

    def save(self, epoch: int, chunk: int) -> None:
        """Write table, Adam moments and the next position atomically."""
        tensors = {
            "table": self.table.numpy(),
            "position": np.array([epoch, chunk, self.steps], np.int64),
            "exp_avg": self.optimiser.exp_avg.numpy(),
            "exp_avg_sq": self.optimiser.exp_avg_sq.numpy(),
            "step": np.array([self.optimiser.steps], np.int64),
        }
        save_tensors(self.state, tensors)

    def train_chunk(self, arrays: dict[str, np.ndarray], sampler: Sampler, rng: np.random.Generator) -> None:
        """One pass over the sentences of a chunk in random order, ``batch_size`` sentences per step."""
        lengths = arrays["lengths"]
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        contexts = torch.from_numpy(arrays["contexts"].astype(np.float32))
        size = self.settings.batch_size
        order = rng.permutation(np.flatnonzero(lengths > 0))
        for first in range(0, len(order), size):
            rows = order[first : first + size]
            owner = np.repeat(rows, lengths[rows])
            ids = arrays["ids"][_spans(starts[rows], lengths[rows])]
            kept = sampler.targets(ids, rng)
            if not kept.any():
                continue
            negatives = sampler.negatives((int(kept.sum()), self.settings.negatives), rng)
            index = torch.from_numpy(np.concatenate([ids[kept][:, None], negatives], axis=1))
            flat = index.reshape(-1)
            vectors = self.table.index_select(0, flat).view(*index.shape, -1).requires_grad_()
            loss = negative_sampling_loss(vectors, contexts[torch.from_numpy(owner[kept])])
            (grad,) = torch.autograd.grad(loss, vectors)
            self.optimiser.step(flat, grad.reshape(len(flat), -1))
            self.loss_sum, self.loss_count = self.loss_sum + loss.item(), self.loss_count + 1


def train_x2static(
    store: ChunkStore,
    chunks: int,
    counts: np.ndarray,
    tokens: int,
    width: int,
    settings: X2StaticSettings,
    state: Path,
    *,
    save_every: float = 180.0,
    show_progress: bool = True,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Train the word table over the stored chunks for ``settings.epochs`` epochs (resumable)."""
    sampler = Sampler(counts, tokens, settings.subsample)
    trainer = Trainer(len(counts), width, settings, state)
    start_epoch, start_chunk = trainer.position
    progress = tqdm(
        total=settings.epochs * chunks,
        initial=start_epoch * chunks + start_chunk,
        desc="training",
        unit=" chunk",
        disable=not show_progress,
    )
    started = last_save = time.monotonic()
    losses: list[float] = []
    for epoch in range(start_epoch, settings.epochs):
        order = np.random.default_rng([settings.seed, epoch]).permutation(chunks)
        for position in range(start_chunk if epoch == start_epoch else 0, chunks):
            rng = np.random.default_rng([settings.seed, epoch, position])
            trainer.train_chunk(store.load(int(order[position])), sampler, rng)
            progress.update(1)
            progress.set_postfix(loss=f"{trainer.loss_sum / max(trainer.loss_count, 1):.4f}")
            if time.monotonic() - last_save > save_every:
                trainer.save(epoch, position + 1)
                last_save = time.monotonic()
        losses.append(round(trainer.loss_sum / max(trainer.loss_count, 1), 5))
        logger.info("epoch %d: mean loss %.4f", epoch + 1, losses[-1])
        trainer.loss_sum, trainer.loss_count = 0.0, 0
    progress.close()
    trainer.save(settings.epochs, 0)
    stats = {
        "steps": trainer.steps,
        "epochs": settings.epochs,
        "epoch_losses": losses,  # of the epochs run in this process (a resumed run lacks the earlier ones)
        "train_seconds": round(time.monotonic() - started, 1),
    }
    return trainer.table.numpy().copy(), stats


class X2StaticRun(StepRun):
    """Runs the X2Static steps for ``settings`` into ``out`` (work folder beside it)."""

    method = "x2static"
    settings: X2StaticSettings

    def __init__(self, settings: X2StaticSettings, out: Path, **options: Any) -> None:
        super().__init__(settings, out, **options)
        s = settings
        vocab = self.vocabulary_key()
        contexts = fingerprint(
            {
                "vocab": vocab,
                "context": s.context,
                "paragraph": s.paragraph_words if s.context == "paragraph" else None,
                "chunk": s.chunk_sentences,
                "batch": s.teacher_batch,
                # keys of prompt-less torch runs stay as they were
                **({"prompt": s.prompt} if s.prompt is not None else {}),
                **backend_key(s.teacher_backend, s.teacher_precision),
            }
        )
        train = fingerprint({"contexts": contexts, "settings": asdict(s)})
        self.keys = {"vocab": vocab, "contexts": contexts, "train": train}

    def _store(self) -> ChunkStore:
        return ChunkStore(self.work.folder / "contexts", self.keys["contexts"])

    def run(self, dtype: str = "float16") -> StaticModel:
        """Run (or reuse) every step, save the model to ``out`` and return it."""
        self.run_steps(("vocab", "contexts", "train"), self.keys)
        model = load(self.work.folder / "x2static")
        model.metadata = self._metadata()
        model.save(self.out, dtype=dtype)
        return model

    def _contexts(self) -> dict[str, Any]:
        s, vocab = self.settings, self.records["vocab"]
        units = groups(self.sentences(), s.context, s.paragraph_words)
        return (self.scale.extract_contexts if self.scale else extract_contexts)(
            self.teacher,
            units,
            vocab["words"],
            self._store(),
            lowercase=vocab["lowercase"],
            chunk_sentences=s.chunk_sentences,
            batch_size=s.teacher_batch,
            total=vocab["sentences"],
            show_progress=self.progress,
            split=self.splitter.words,
        )

    def _train(self) -> dict[str, Any]:
        vocab, contexts = self.records["vocab"], self.records["contexts"]
        counts = np.asarray(vocab["counts"], np.int64)
        state = self.work.folder / f"train-{self.keys['train']}.partial.safetensors"
        table, stats = train_x2static(
            self._store(),
            contexts["chunks"],
            counts,
            vocab.get("tokens") or int(counts.sum()),
            self.teacher.hidden_size,
            self.settings,
            state,
            save_every=self.save_every,
            show_progress=self.progress,
        )
        model = StaticModel(
            vocab["words"], table, tokenizer=self.teacher.subword_tokenizer, splitter=self.splitter.name
        )
        model.save(self.work.folder / "x2static", dtype="float32")
        state.unlink(missing_ok=True)
        return stats

    def _metadata(self) -> dict[str, Any]:
        return self.metadata(self.records["contexts"]["teacher_passes"])


def run_x2static(settings: X2StaticSettings, frame: Frame) -> StaticModel:
    """The x2static method's run: the steps above in the shared frame."""
    return run_in_frame(X2StaticRun, settings, frame)
