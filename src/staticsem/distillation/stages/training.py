"""The training loop of stage 3 and of pairs training: a word (and piece) table fine-tuned on a weighted
sum of objectives, with a dev split, early stopping, an optional moving average, and a checkpoint
to resume from.

Every step draws one batch of each objective and adds their weighted losses. The summed dev loss every
``eval_every`` steps keeps the best table; training stops after ``patience`` evaluations without
improvement or at ``max_steps``. A dev split needs ``MIN_DEV`` examples or more: with fewer (``dev_size``
0, or too little data) the run says so, trains all ``max_steps`` and keeps the last table. A dev loss that
is not a number (training diverged) is an error, never a table kept silently. With ``checkpoint``, the
whole state (tables, optimiser moments, the batch streams and the random generator) is saved atomically
every ``save_every`` seconds, and a run given the same ``key`` continues from it exactly as if it had not
stopped; a checkpoint of another key is not resumed (training starts over, and says so).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.numpy import load_file
from tqdm.auto import tqdm

from staticsem.distillation.stages.kd_settings import KDSettings
from staticsem.errors import InputError, StaticsemError
from staticsem.io.atomic import save_tensors
from staticsem.model import StaticModel
from staticsem.pieces import PieceTable

logger = logging.getLogger(__name__)
POOL_STEPS = 20  # steps that draw neighbour groups from one pool
MIN_DEV = 2  # dev examples an objective needs for a dev loss (its in-batch losses compare two or more)


class Objective:
    """One training signal: ``size`` examples, a loss over a batch of them, which are usable, its weight."""

    name = ""
    size = 0
    weight = 1.0

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

    def families(self) -> Sequence[np.ndarray] | None:
        """Groups of examples (rows) trained in the same batch, e.g. a sentence and its edited copies."""
        return None

    def to(self, device: str | torch.device) -> Objective:
        """The objective's data (bags of ids, targets) moved once to ``device``, where the table trains: a
        step then copies only its batch's row numbers."""
        return self


def trainable_table(model: StaticModel) -> np.ndarray:
    """The rows distillation trains: the word rows, then (with subword pieces) the piece rows."""
    words = np.asarray(model.vectors, dtype=np.float32)
    if model.pieces is None:
        return np.array(words)
    return np.vstack([words, model.pieces.vectors.astype(np.float32)])


def with_table(model: StaticModel, table: np.ndarray, metadata: dict) -> StaticModel:
    """``model`` with its word (and piece) rows replaced by ``table``'s, its other parts (modes and their
    row sets too) kept."""
    words = len(model)
    pieces = None if model.pieces is None else PieceTable(table[words:], model.tokenizer, model.pieces.weight)
    return model.replace(vectors=np.ascontiguousarray(table[:words]), pieces=pieces, metadata=metadata)


def clip_gradient(table: torch.nn.Parameter, limit: float, frozen_from: int | None = None) -> None:
    """Scale the (dense or sparse) gradient of ``table`` to a norm of at most ``limit``; rows from
    ``frozen_from`` on get none."""
    grad = table.grad
    if grad is None:
        return
    if grad.is_sparse:
        grad = grad.coalesce()
        indices, values = grad.indices(), grad.values()
        if frozen_from is not None:
            keep = indices[0] < frozen_from
            indices, values = indices[:, keep], values[keep]
        norm = values.norm()
        if norm > limit:
            values = values * (limit / norm)
        # still coalesced (a subset of sorted unique rows): said so, the optimiser does not coalesce again
        table.grad = torch.sparse_coo_tensor(
            indices, values, grad.shape, check_invariants=False, is_coalesced=True
        )
    else:
        if frozen_from is not None:
            grad[frozen_from:] = 0.0
        torch.nn.utils.clip_grad_norm_([table], limit)


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
        self.groups = int(settings.groups * settings.batch_size) // max(1, settings.group_size)
        self.unit = objective.directions() if self.groups and settings.group_size > 1 else None
        self.pool_age, self.pool_rows, self.pool_unit = 0, np.empty(0, np.int64), np.empty((0, 0), np.float32)
        self.families = self._train_families(objective) if settings.family_share > 0 else []
        self.family_rows = int(settings.family_share * settings.batch_size) if self.families else 0

    def _train_families(self, objective: Objective) -> list[np.ndarray]:
        """The objective's families cut to their training examples; those left with one or none dropped."""
        train = np.zeros(objective.size, bool)
        train[self.train] = True
        cut = (family[train[family]] for family in objective.families() or [])
        return [family for family in cut if len(family) > 1]

    def next_batch(self) -> np.ndarray:
        if self.family_rows:
            return self.family_batch()
        if self.unit is not None:
            return self.grouped_batch()
        return self.random_rows(self.size)

    def family_batch(self) -> np.ndarray:
        """Whole random families up to ``family_rows`` examples, the rest as the batch would be without."""
        drawn: dict[int, int] = {}  # family → its size, each family once
        while sum(drawn.values()) < self.family_rows and len(drawn) < len(self.families):
            at = int(self.rng.integers(len(self.families)))
            drawn[at] = len(self.families[at])
        picked = np.unique(np.concatenate([self.families[at] for at in drawn]))
        left = max(0, self.size - len(picked))  # the last family may overshoot its share
        rest = self.grouped_batch(left) if self.unit is not None else self.random_rows(left)
        return np.unique(np.concatenate([picked, rest]))

    def random_rows(self, count: int) -> np.ndarray:
        if self.at + count > len(self.order):
            self.order, self.at = self.rng.permutation(self.train), 0
        self.at += count
        return self.order[self.at - count : self.at]

    def grouped_batch(self, size: int | None = None) -> np.ndarray:
        """``groups`` seeds with their nearest neighbours in the current pool, the rest random (``size``
        examples in all, by default the batch's)."""
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
        wanted = self.size if size is None else size
        return np.unique(np.concatenate([rows, self.random_rows(max(0, wanted - len(rows)))]))

    def has_dev(self) -> bool:
        """Whether the split holds a dev batch to score (``MIN_DEV`` examples or more)."""
        return len(self.dev) >= MIN_DEV and self.size >= MIN_DEV

    def dev_loss(self, table: torch.Tensor) -> float:
        parts = [self.dev[i : i + self.size] for i in range(0, len(self.dev), self.size)]
        return float(np.mean(self.objective.batch_losses(table, [p for p in parts if len(p) >= MIN_DEV])))

    def state(self) -> tuple[dict[str, int], dict[str, np.ndarray]]:
        """What resuming needs of the stream: counters and arrays."""
        return {"at": self.at, "pool_age": self.pool_age}, {"order": self.order, "pool_rows": self.pool_rows}

    def restore(self, counters: dict[str, int], arrays: dict[str, np.ndarray]) -> None:
        self.at, self.pool_age = counters["at"], counters["pool_age"]
        self.order, self.pool_rows = arrays["order"].astype(np.int64), arrays["pool_rows"].astype(np.int64)
        if self.unit is not None and len(self.pool_rows):
            self.pool_unit = self.unit[self.pool_rows]


class _Run:
    """The state of one training run: tables, optimiser, batch streams, counters; saved and restored."""

    def __init__(self, table: np.ndarray, splits: list[_Split], settings: KDSettings, device: str) -> None:
        self.table = torch.nn.Parameter(torch.from_numpy(table).to(device))
        self.optimiser: torch.optim.Optimizer = (
            torch.optim.SparseAdam([self.table], lr=settings.lr)
            if settings.lazy
            else torch.optim.Adam([self.table], lr=settings.lr)
        )
        self.scored = self.table.detach().clone() if settings.average else self.table
        self.splits, self.step, self.stale = splits, 0, 0
        self.best, self.initial, self.best_table = 0.0, 0.0, self.table.detach().clone()
        self.current = 0.0

    def evaluate(self, dev_loss: Callable[[torch.Tensor], float], average: float) -> None:
        """Score the table (or its moving average); keep it if best, else count a stale evaluation."""
        if average:
            self.scored.mul_(average).add_(self.table.detach(), alpha=1.0 - average)
        self.current = dev_loss(self.scored)
        check_loss(self.current, self.step)
        if self.current < self.best:  # kept in place: a fresh clone of a 100k-row table took 71 ms, a copy 15
            self.best, self.stale = self.current, 0
            self.best_table.copy_(self.scored.detach())
        else:
            self.stale += 1

    def save(self, path: Path, key: str, rng: np.random.Generator) -> None:
        arrays = {"table": self.table.detach().cpu().numpy(), "best_table": self.best_table.cpu().numpy()}
        if self.scored is not self.table:
            arrays["scored"] = self.scored.detach().cpu().numpy()
        moments: dict[str, Any] = {}
        for name, value in self.optimiser.state_dict()["state"].get(0, {}).items():
            if isinstance(value, torch.Tensor):
                arrays[f"optimiser.{name}"] = value.detach().cpu().numpy().reshape(value.shape or (1,))
                moments[name] = list(value.shape)
            else:
                moments[name] = {"value": value}
        streams = [split.state() for split in self.splits]
        for i, (_, stream) in enumerate(streams):
            arrays.update({f"split{i}.{name}": array for name, array in stream.items()})
        counters = {"step": self.step, "stale": self.stale, "best": self.best, "initial": self.initial}
        state = {"key": key, **counters, "moments": moments, "rng": rng.bit_generator.state}
        record = json.dumps({**state, "splits": [c for c, _ in streams]}).encode()
        arrays["state.json"] = np.frombuffer(record, np.uint8)  # one file: tables and counters never disagree
        save_tensors(path, {k: np.ascontiguousarray(v) for k, v in arrays.items()})

    def restore(self, path: Path, key: str, rng: np.random.Generator) -> bool:
        """Continue from the checkpoint at ``path`` if it was written for ``key``."""
        if not path.is_file():
            return False
        arrays = load_file(str(path))
        state = json.loads(arrays["state.json"].tobytes())
        if state.get("key") != key:
            logger.warning("%s was written by other settings or data: training starts over", path)
            return False
        device = self.table.device
        with torch.no_grad():
            self.table.copy_(torch.from_numpy(arrays["table"]))
        self.best_table.copy_(torch.from_numpy(arrays["best_table"]))
        if "scored" in arrays:
            self.scored = torch.from_numpy(arrays["scored"]).to(device)
        moments = {
            name: torch.from_numpy(arrays[f"optimiser.{name}"]).reshape(shape).to(device)
            if isinstance(shape, list)
            else shape["value"]
            for name, shape in state["moments"].items()
        }
        optimiser = self.optimiser.state_dict()
        self.optimiser.load_state_dict({**optimiser, "state": {0: moments} if moments else {}})
        for i, (split, counters) in enumerate(zip(self.splits, state["splits"], strict=True)):
            split.restore(counters, {n: arrays[f"split{i}.{n}"] for n in ("order", "pool_rows")})
        self.step, self.stale = state["step"], state["stale"]
        self.best, self.initial = state["best"], state["initial"]
        rng.bit_generator.state = state["rng"]
        logger.info("training resumes at step %d from %s", self.step, path)
        return True


def check_loss(loss: float, step: int) -> None:
    """Raise ``StaticsemError`` when a dev loss is not a number: training diverged (or the dev split holds
    nothing to score), and no table can be called the best."""
    if not np.isfinite(loss):
        raise StaticsemError(
            f"training diverged: the dev loss is {loss} at step {step}; lower the learning rate "
            "(the work folder keeps every finished step)"
        )


def device_for(name: str | None = None) -> str:
    """``name``, or a CUDA device when torch sees one, else the CPU."""
    return name or ("cuda" if torch.cuda.is_available() else "cpu")


def train_table(
    model: StaticModel,
    objectives: Sequence[Objective],
    settings: KDSettings = KDSettings(),
    show_progress: bool = True,
    *,
    frozen_from: int | None = None,
    checkpoint: Path | None = None,
    key: str = "",
    save_every: float = 180.0,
    device: str | None = None,
) -> tuple[StaticModel, dict[str, float | None]]:
    """Fine-tune ``model``'s table on the weighted sum of ``objectives`` (one batch of each per step).

    ``frozen_from``: table rows from this index on (the pieces, after the words) get no update.
    ``checkpoint``: a safetensors path for the resumable state, written atomically every ``save_every``
    seconds (at evaluations) and removed at the end; a run with the same ``key`` resumes from it.

    :raises InputError: when an objective has too few usable examples for a train and a dev split.
    """
    if not objectives:
        raise InputError("no training objective given")
    rng = np.random.default_rng(settings.seed)
    splits = [_Split(objective, settings, rng) for objective in objectives]
    torch.manual_seed(settings.seed)
    where = device_for(device)
    for objective in objectives:
        objective.to(where)
    run = _Run(trainable_table(model), splits, settings, where)

    def dev_loss(scored: torch.Tensor) -> float:
        with torch.no_grad():
            return sum(split.objective.weight * split.dev_loss(scored) for split in splits)

    early = all(split.has_dev() for split in splits)  # else: every step, the last table kept
    if not early:
        sizes = ", ".join(f"{split.objective.name} {len(split.dev)}" for split in splits)
        logger.warning(
            "dev split of %s examples (%d or more needed): training runs all %d steps without early "
            "stopping and keeps the last table",
            sizes,
            MIN_DEV,
            settings.max_steps,
        )
    if (checkpoint is None or not run.restore(checkpoint, key, rng)) and early:
        run.best = run.initial = dev_loss(run.scored)
        check_loss(run.initial, 0)
    started = saved = time.perf_counter()
    progress = tqdm(
        total=settings.max_steps,
        initial=run.step,
        desc="training",
        unit=" step",
        disable=not show_progress,
        mininterval=2,
    )
    while run.step < settings.max_steps and run.stale < settings.stale_limit:
        run.optimiser.zero_grad()
        loss = sum(
            s.objective.weight * s.objective.loss(run.table, s.next_batch(), settings.lazy) for s in splits
        )
        assert isinstance(loss, torch.Tensor)
        loss.backward()
        clip_gradient(run.table, settings.clip, frozen_from)
        run.optimiser.step()
        run.step += 1
        progress.update(1)
        if run.step % settings.eval_every == 0 or run.step == settings.max_steps:  # the last steps count
            if early:
                run.evaluate(dev_loss, settings.average)
                progress.set_postfix(dev=f"{run.current:.4f}", best=f"{run.best:.4f}")
            if checkpoint is not None and time.perf_counter() - saved >= save_every:
                run.save(checkpoint, key, rng)
                saved = time.perf_counter()
    progress.close()
    if not early:
        run.best_table = run.table.detach().clone()
    stats: dict[str, float | None] = {
        "steps": run.step,
        "dev_loss_start": run.initial if early else None,
        "dev_loss_best": run.best if early else None,
        **{f"{s.objective.name}_train": len(s.train) for s in splits},
        **{f"{s.objective.name}_dev": len(s.dev) for s in splits},
        "seconds": round(time.perf_counter() - started, 1),
    }
    logger.info("training (%s): %s", "+".join(s.objective.name for s in splits), stats)
    if checkpoint is not None:
        checkpoint.unlink(missing_ok=True)
    metadata = {**model.metadata, "kd": {**asdict(settings), **stats}}
    return with_table(model, run.best_table.cpu().numpy(), metadata), stats
