"""One batch through the teacher, and the batches made ready ahead of it (stage 1's inner loop).

* each batch is made ready ahead (``teachers.batches``: tokenised, each vocabulary word's tokens located) in
  a thread, or in worker processes where there are cores to spare;
* the teacher's states stay where they are made: the per-word sums and counts and the sentence means are
  reduced on the teacher's device, so only reduced vectors reach the host;
* a GPU out of memory halves the batch and retries it (said in the log).
"""

from __future__ import annotations

import contextlib
import logging
import queue as queues
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from staticsem.distillation.teachers.batches import Prepared, occurrences, request
from staticsem.distillation.workers import Message, Pool
from staticsem.phrases import entry_table
from staticsem.text import BUILTIN_SPLITTERS, WordSplitter

logger = logging.getLogger(__name__)
AHEAD = 4  # batches made ready ahead of the teacher


# ------------------------------------------------------------------ the reduction (on the teacher's device)
def reduce_batch(
    states: torch.Tensor,
    own: torch.Tensor,
    located: tuple[np.ndarray, np.ndarray, np.ndarray],
    sums: torch.Tensor,
    counts: torch.Tensor,
) -> torch.Tensor:
    """Add a batch's word occurrences to ``sums``/``counts`` and return its sentences' own-token means, all on
    the device of ``states``: each occurrence's tokens averaged, each word's occurrences summed.

    ``located``: (flat token positions, their occurrence numbers, each occurrence's vocabulary row).
    """
    positions, occurrence_of, words = (torch.from_numpy(a).to(states.device) for a in located)
    if len(words):
        flat = states.reshape(-1, states.shape[-1])[positions].float()
        occurrence = torch.zeros(len(words), flat.shape[1], device=flat.device).index_add_(
            0, occurrence_of, flat
        )
        pieces = torch.zeros(len(words), dtype=torch.int64, device=flat.device)
        pieces = pieces.index_add_(0, occurrence_of, torch.ones_like(occurrence_of)).clamp(min=1)
        sums.index_add_(0, words, occurrence / pieces[:, None])
        counts.index_add_(0, words, torch.ones_like(words))
    mask = own.to(states.device).unsqueeze(-1).to(torch.float32)
    return (states.float() * mask).sum(1) / mask.sum(1).clamp(min=1)


def zero_sums(
    words: int, width: int, device: str | torch.device = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Empty per-word state sums (words × width) and occurrence counts."""
    return torch.zeros(words, width, device=device), torch.zeros(words, dtype=torch.int64, device=device)


# ------------------------------------------------------------------ one batch through the teacher
@dataclass
class Batch:
    """A planned batch: its sentence numbers and texts, and (a real teacher's) prepared inputs."""

    rows: np.ndarray
    texts: list[str]
    prepared: Prepared | None = None


def _oom() -> tuple[type[BaseException], ...]:
    error = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    return (error,) if error is not None else ()


class Pass:
    """Runs batches through ``teacher`` and reduces them into ``sums``/``counts`` on its device."""

    def __init__(
        self,
        teacher: Any,
        index: dict[str, int],
        lowercase: bool,
        splitter: WordSplitter | None,
        layer: int | None,
    ) -> None:
        self.splitter = splitter or WordSplitter()
        self.teacher, self.index, self.lowercase, self.layer = teacher, index, lowercase, layer
        self.phrases = entry_table(list(index))  # a self-tokenising teacher's
        # a real teacher's batch preparer for the vocabulary (a teacher that tokenises itself in
        # ``forward``, such as the tests' fake, has none)
        make: Callable[..., Any] | None = getattr(teacher, "preparer", None)
        self.preparer = None if make is None else make(list(index), lowercase, self.splitter)

    def __call__(self, batch: Batch, sums: torch.Tensor, counts: torch.Tensor) -> dict[str, np.ndarray]:
        """The batch's per-sentence outputs (its word states added to ``sums``/``counts``); a GPU out of
        memory halves it and retries each half."""
        try:
            states, own, located, sentence = self._forward(batch)
        except _oom() as exc:
            if len(batch.rows) < 2:
                raise
            del exc
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            half = len(batch.rows) // 2
            logger.warning(
                "the GPU ran out of memory on a batch of %d sentences: halving it and retrying",
                len(batch.rows),
            )
            parts = [
                Batch(batch.rows[:half], batch.texts[:half]),
                Batch(batch.rows[half:], batch.texts[half:]),
            ]
            found = [self(self.ready(part), sums, counts) for part in parts]
            return {key: np.concatenate([f[key] for f in found]) for key in found[0]}
        means = reduce_batch(states, own, located, sums, counts)
        return {
            "embeddings": sentence.float().cpu().numpy(),
            "token_means": means.cpu().numpy().astype(np.float16),
        }

    def ready(self, batch: Batch) -> Batch:
        """``batch`` prepared for the teacher (a real teacher's: tokenised and located here)."""
        if self.preparer is not None and batch.prepared is None:
            batch.prepared = self.preparer(batch.texts, batch.rows)
        return batch

    def _forward(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, Any, torch.Tensor]:
        prepared = self.ready(batch).prepared
        if prepared is not None:
            states, sentence = self.teacher.run(prepared.inputs, self.layer)
            located = (prepared.positions, prepared.occurrence_of, prepared.words)
            return states, torch.from_numpy(prepared.own), located, sentence
        out = self.teacher.forward(batch.texts, self.layer)  # a teacher that tokenises itself
        located = occurrences(
            batch.texts,
            out.offsets.numpy(),
            out.own.numpy(),
            self.index,
            self.lowercase,
            self.splitter,
            self.phrases,
        )
        return out.states, out.own, located, out.sentence


# ------------------------------------------------------------------ batches made ready ahead
@contextlib.contextmanager
def ahead(planned: Iterator[Batch], run: Pass, workers: int) -> Iterator[Iterator[Batch]]:
    """``planned`` batches made ready in a thread ahead of the teacher (by ``workers`` processes when more
    than one), at most ``AHEAD`` at a time."""
    ready: queues.Queue[Any] = queues.Queue(maxsize=AHEAD)
    stop = threading.Event()
    pool = None
    if workers > 1 and run.preparer is not None and run.preparer.splitter in BUILTIN_SPLITTERS:
        pool = Pool(
            "staticsem.distillation.teachers.batches:job",
            run.preparer.params(),
            setup="staticsem.distillation.teachers.batches:setup",
            workers=workers,
        )

    def made() -> Iterator[Batch]:
        if pool is None:
            yield from (run.ready(batch) for batch in planned)
            return
        batches: list[Batch] = []

        def messages() -> Iterator[Message]:
            for batch in planned:
                batches.append(batch)
                yield request(batch.texts, batch.rows)

        for message in pool.map(messages()):
            batch = batches.pop(0)
            batch.prepared = Prepared.from_message(message)
            yield batch

    def fill() -> None:
        try:
            for batch in made():
                while not stop.is_set():
                    with contextlib.suppress(queues.Full):
                        ready.put(batch, timeout=0.1)
                        break
                if stop.is_set():
                    return
            ready.put(None)
        except BaseException as exc:  # raised where the batches are read
            ready.put(exc)

    thread = threading.Thread(target=fill, daemon=True)
    thread.start()

    def read() -> Iterator[Batch]:
        while (item := ready.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item

    try:
        yield read()
    finally:
        stop.set()
        while thread.is_alive():
            with contextlib.suppress(queues.Empty):
                ready.get(timeout=0.1)
        if pool is not None:
            pool.close(now=True)
