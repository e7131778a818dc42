"""Stage 1, contextual extraction: each vocabulary word's mean last-layer state over its occurrences.

One teacher pass over a sentence yields every vocabulary word in it (states averaged over the word's
subword tokens, then over occurrences) and the teacher's own sentence embedding, kept as the
knowledge-distillation target. Sentences go in batches sorted by length; partial sums are saved every
few minutes, so an interrupted run (even kill -9) resumes at the last saved batch.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file, save_file
from tqdm.auto import tqdm

from staticsem.distillation.teacher import Teacher
from staticsem.io.atomic import atomic_file
from staticsem.text import WordSplitter

logger = logging.getLogger(__name__)


@dataclass
class Extraction:
    """Stage-1 result: summed states and occurrence counts per word, teacher sentence embeddings."""

    sums: np.ndarray  # V × H
    counts: np.ndarray  # V
    embeddings: np.ndarray  # N × D, in the order of the sentences given
    passes: int

    def vectors(self) -> np.ndarray:
        """Mean state per word (zero rows for words never seen)."""
        return (self.sums / np.maximum(self.counts, 1)[:, None]).astype(np.float32)


def length_batches(sentences: Sequence[str], batch_size: int) -> list[np.ndarray]:
    """Sentence indices in batches of similar length (less padding)."""
    order = np.argsort([len(s) for s in sentences], kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _occurrences(
    texts: Sequence[str],
    offsets: np.ndarray,
    own: np.ndarray,
    index: dict[str, int],
    lowercase: bool,
    splitter: WordSplitter,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token positions (flat b*T+t), their occurrence number, and each occurrence's word id."""
    positions: list[int] = []
    occurrence_of: list[int] = []
    words: list[int] = []
    width = offsets.shape[1]
    for b, text in enumerate(texts):
        spans = [(start, end, text[start:end]) for start, end in splitter.spans(text)]
        starts = [start for start, _, _ in spans]
        ids: dict[int, int] = {}  # span number → occurrence number
        for t in np.flatnonzero(own[b]):
            start = int(offsets[b, t, 0])
            j = bisect.bisect_right(starts, start) - 1
            if j < 0 or start >= spans[j][1]:
                continue
            if j not in ids:
                word = spans[j][2].lower() if lowercase else spans[j][2]
                row = index.get(word)
                if row is None and not lowercase:
                    row = index.get(word.lower())
                if row is None:
                    ids[j] = -1
                    continue
                ids[j] = len(words)
                words.append(row)
            if ids[j] >= 0:
                positions.append(b * width + int(t))
                occurrence_of.append(ids[j])
    return np.asarray(positions, np.int64), np.asarray(occurrence_of, np.int64), np.asarray(words, np.int64)


def save_partial(
    path: Path, sums: torch.Tensor, counts: torch.Tensor, embeddings: np.ndarray, done: int
) -> None:
    with atomic_file(path) as tmp:
        save_file(
            {
                "sums": sums.numpy(),
                "counts": counts.numpy(),
                "embeddings": embeddings,
                "done": np.array([done], np.int64),
            },
            str(tmp),
        )


def zero_sums(words: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Empty per-word state sums (words × width) and occurrence counts."""
    return torch.zeros(words, width), torch.zeros(words, dtype=torch.int64)


def resume(checkpoint: Path, batches: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray, int]:
    """Sums, counts, embeddings and finished batches saved in a stage-1 checkpoint."""
    saved = load_file(str(checkpoint))
    done = int(saved["done"][0])
    logger.info("resuming stage 1 after batch %d of %d", done, batches)
    return torch.from_numpy(saved["sums"]), torch.from_numpy(saved["counts"]), saved["embeddings"], done


def accumulate(
    teacher: Teacher,
    texts: Sequence[str],
    index: dict[str, int],
    sums: torch.Tensor,
    counts: torch.Tensor,
    lowercase: bool,
    layer: int | None = None,
    splitter: WordSplitter | None = None,
) -> np.ndarray:
    """One teacher pass over ``texts``: add their words' states to ``sums``/``counts``; return the
    teacher's sentence embeddings of ``texts``."""
    out = teacher.forward(list(texts), layer)
    positions, occurrence_of, words = _occurrences(
        texts, out.offsets.numpy(), out.own.numpy(), index, lowercase, splitter or WordSplitter()
    )
    if len(words):
        flat = out.states.reshape(-1, out.states.shape[-1])[torch.from_numpy(positions)]
        occurrence = torch.zeros(len(words), flat.shape[1]).index_add_(
            0, torch.from_numpy(occurrence_of), flat
        )
        pieces = torch.bincount(torch.from_numpy(occurrence_of), minlength=len(words)).clamp(min=1)
        word_ids = torch.from_numpy(words)
        sums.index_add_(0, word_ids, occurrence / pieces[:, None])
        counts += torch.bincount(word_ids, minlength=len(counts))
    return out.sentence.numpy()


def extract_shard(
    teacher: Teacher,
    batches: Sequence[Sequence[str]],
    index: dict[str, int],
    lowercase: bool,
    layer: int | None = None,
    splitter: WordSplitter | None = None,
) -> dict[str, np.ndarray]:
    """Stage 1 over a shard of batches: the words it saw (``ids``), their ``sums`` and ``counts``,
    and the sentence ``embeddings`` in batch order (what a scale-out worker returns)."""
    sums, counts = zero_sums(len(index), teacher.hidden_size)
    embeddings = [
        accumulate(teacher, texts, index, sums, counts, lowercase, layer, splitter) for texts in batches
    ]
    ids = torch.nonzero(counts).flatten()
    return {
        "ids": ids.numpy(),
        "sums": sums[ids].numpy(),
        "counts": counts[ids].numpy(),
        "embeddings": np.concatenate(embeddings).astype(np.float32),
    }


def extract(
    teacher: Teacher,
    sentences: Sequence[str],
    vocab: Sequence[str],
    *,
    lowercase: bool,
    batch_size: int = 64,
    checkpoint: Path | None = None,
    save_every: float = 180.0,
    show_progress: bool = True,
    layer: int | None = None,
    splitter: WordSplitter | None = None,
) -> Extraction:
    """Run the teacher over ``sentences`` once and gather stage-1 states for ``vocab``.

    :param layer: teacher layer whose token states are averaged (``None``: the last; ASE uses any).
    :param splitter: how texts split into words (default: spaces and punctuation).
    """
    splitter = splitter or WordSplitter()
    index = {w: i for i, w in enumerate(vocab)}
    batches = length_batches(sentences, batch_size)
    sums, counts = zero_sums(len(vocab), teacher.hidden_size)
    embeddings = np.zeros((len(sentences), 0), np.float32)
    done = 0
    if checkpoint is not None and checkpoint.is_file():
        sums, counts, embeddings, done = resume(checkpoint, len(batches))
    last_save = time.monotonic()
    progress = tqdm(
        total=len(sentences),
        desc="teacher passes",
        unit=" sent",
        disable=not show_progress,
        initial=sum(len(b) for b in batches[:done]),
        mininterval=2,
    )
    for number in range(done, len(batches)):
        chosen = batches[number]
        found = accumulate(
            teacher, [sentences[i] for i in chosen], index, sums, counts, lowercase, layer, splitter
        )
        if embeddings.shape[1] == 0:
            embeddings = np.zeros((len(sentences), found.shape[1]), np.float32)
        embeddings[chosen] = found
        progress.update(len(chosen))
        if checkpoint is not None and time.monotonic() - last_save > save_every:
            save_partial(checkpoint, sums, counts, embeddings, number + 1)
            last_save = time.monotonic()
    progress.close()
    if checkpoint is not None:
        save_partial(checkpoint, sums, counts, embeddings, len(batches))
    return Extraction(sums.numpy(), counts.numpy(), embeddings, passes=len(sentences))
