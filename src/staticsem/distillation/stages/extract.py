"""Stage 1, contextual extraction: each vocabulary word's mean last-layer state over its occurrences.

One teacher pass over a sentence yields every vocabulary word in it (states averaged over the word's
subword tokens, then over occurrences) and the teacher's own sentence embedding, kept as the
knowledge-distillation target. Sentences go in batches sorted by length; partial sums are saved every
few minutes, so an interrupted run (even kill -9) resumes at the last saved batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file
from tqdm.auto import tqdm

from staticsem.distillation.teachers.teacher import Teacher
from staticsem.io.atomic import save_tensors
from staticsem.text import WordSplitter, containing_span

logger = logging.getLogger(__name__)


@dataclass
class Extraction:
    """Stage-1 result: summed states and occurrence counts per word, per-sentence teacher outputs."""

    sums: np.ndarray  # V × H
    counts: np.ndarray  # V
    embeddings: np.ndarray  # N × D, in the order of the sentences given
    passes: int
    token_means: np.ndarray | None = None  # N × H float16, the mean of each sentence's own token states

    def vectors(self) -> np.ndarray:
        """Mean state per word (zero rows for words never seen)."""
        return (self.sums / np.maximum(self.counts, 1)[:, None]).astype(np.float32)


# Per-sentence outputs of a teacher pass: the teacher's (normalised) sentence embedding, the KD target;
# and the plain mean of the sentence's own token states (no [CLS]/[SEP]), tokenlearn's target
PER_SENTENCE = {"embeddings": np.float32, "token_means": np.float16}


class SentenceRows:
    """Per-sentence outputs for ``count`` sentences, filled batch by batch in any order."""

    def __init__(self, count: int, saved: dict[str, np.ndarray] | None = None) -> None:
        self.count = count
        self.arrays = dict(saved or {})
        # a run resumed from a partial without some output (an older format) goes on without it
        self.closed = bool(saved) and bool(set(PER_SENTENCE) - set(self.arrays))

    def put(self, rows: np.ndarray, found: dict[str, np.ndarray]) -> None:
        """Store one batch's outputs at sentence rows ``rows``."""
        for key, value in found.items():
            if key not in self.arrays:
                if self.closed:
                    continue
                self.arrays[key] = np.zeros((self.count, value.shape[1]), PER_SENTENCE[key])
            self.arrays[key][rows] = value

    def result(self, sums: torch.Tensor, counts: torch.Tensor) -> Extraction:
        """The finished extraction."""
        embeddings = self.arrays.get("embeddings", np.zeros((self.count, 0), np.float32))
        return Extraction(
            sums.numpy(), counts.numpy(), embeddings, self.count, self.arrays.get("token_means")
        )


def length_batches(sentences: Sequence[str], batch_size: int) -> list[np.ndarray]:
    """Sentence indices in batches of similar length (less padding)."""
    order = np.argsort([len(s) for s in sentences], kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def sentence_embeddings(
    teacher: Teacher, texts: Sequence[str], batch_size: int, dim: int, show_progress: bool = False
) -> np.ndarray:
    """The teacher's own ``dim``-d sentence embeddings of ``texts`` (unit rows, input order), in
    length-sorted batches."""
    out = np.zeros((len(texts), dim), np.float32)
    for rows in tqdm(length_batches(texts, batch_size), "teacher", disable=not show_progress):
        out[rows] = teacher.forward([texts[i] for i in rows]).sentence.numpy()
    return out


def alone_states(
    teacher: Teacher,
    texts: Sequence[str],
    batch_size: int,
    layer: int | None = None,
    show_progress: bool = False,
) -> np.ndarray:
    """Each text alone through the teacher: the mean of its own tokens' states at ``layer`` (input order)."""
    out = np.zeros((len(texts), teacher.hidden_size), np.float32)
    for start in tqdm(range(0, len(texts), batch_size), "pieces", disable=not show_progress):
        batch = teacher.forward(list(texts[start : start + batch_size]), layer)
        own = batch.own.unsqueeze(-1).to(batch.states.dtype)
        out[start : start + len(own)] = ((batch.states * own).sum(1) / own.sum(1).clamp(min=1)).numpy()
    return out


def _occurrences(
    texts: Sequence[str],
    offsets: np.ndarray,
    own: np.ndarray,
    index: dict[str, int],
    lowercase: bool,
    splitter: WordSplitter,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token positions (flat b*T+t), their occurrence number, and each occurrence's word id.

    An occurrence is a word span of a text holding at least one of the text's own tokens (by the
    token's start); occurrences are numbered in text and span order.
    """
    rows, cols = np.nonzero(own)
    span, flat, owner = containing_span([splitter.spans(t) for t in texts], rows, offsets[rows, cols, 0])
    inside = span >= 0
    rows, cols, span = rows[inside], cols[inside], span[inside]
    hit = np.unique(span)  # spans holding a token, in text order
    words = np.fromiter(
        (
            _word_row(texts[b][start:end], index, lowercase)
            for b, (start, end) in zip(owner[hit].tolist(), flat[hit].tolist(), strict=True)
        ),
        np.int64,
        count=len(hit),
    )
    known = words >= 0
    number = np.full(len(flat), -1, np.int64)
    number[hit[known]] = np.arange(int(known.sum()))
    occurrence_of = number[span]
    kept = occurrence_of >= 0
    width = offsets.shape[1]
    return (rows[kept] * width + cols[kept]).astype(np.int64), occurrence_of[kept], words[known]


def _word_row(word: str, index: dict[str, int], lowercase: bool) -> int:
    """The vocabulary row of a word as written (lower-cased for uncased teachers; a cased teacher
    falls back to the lower-case form), or -1."""
    row = index.get(word.lower() if lowercase else word)
    if row is None and not lowercase:
        row = index.get(word.lower())
    return -1 if row is None else row


def save_partial(
    path: Path, sums: torch.Tensor, counts: torch.Tensor, rows: dict[str, np.ndarray], done: int
) -> None:
    """Save running sums, counts, per-sentence outputs and the number of finished batches."""
    arrays = {"sums": sums.numpy(), "counts": counts.numpy(), "done": np.array([done], np.int64)}
    save_tensors(path, {**arrays, **rows})


def zero_sums(words: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Empty per-word state sums (words × width) and occurrence counts."""
    return torch.zeros(words, width), torch.zeros(words, dtype=torch.int64)


def resume(checkpoint: Path, batches: int) -> tuple[torch.Tensor, torch.Tensor, dict[str, np.ndarray], int]:
    """Sums, counts, per-sentence outputs and finished batches saved in a stage-1 checkpoint."""
    saved = load_file(str(checkpoint))
    done = int(saved.pop("done")[0])
    logger.info("resuming stage 1 after batch %d of %d", done, batches)
    sums, counts = torch.from_numpy(saved.pop("sums")), torch.from_numpy(saved.pop("counts"))
    return sums, counts, saved, done


def accumulate(
    teacher: Teacher,
    texts: Sequence[str],
    index: dict[str, int],
    sums: torch.Tensor,
    counts: torch.Tensor,
    lowercase: bool,
    layer: int | None = None,
    splitter: WordSplitter | None = None,
) -> dict[str, np.ndarray]:
    """One teacher pass over ``texts``: add their words' states to ``sums``/``counts``; return the
    per-sentence outputs (``PER_SENTENCE``) of ``texts``."""
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
    own = out.own.unsqueeze(-1).to(out.states.dtype)
    means = (out.states * own).sum(1) / own.sum(1).clamp(min=1)
    return {"embeddings": out.sentence.numpy(), "token_means": means.numpy().astype(np.float16)}


def extract_shard(
    teacher: Teacher,
    batches: Sequence[Sequence[str]],
    index: dict[str, int],
    lowercase: bool,
    layer: int | None = None,
    splitter: WordSplitter | None = None,
) -> dict[str, np.ndarray]:
    """Stage 1 over a shard of batches: the words it saw (``ids``), their ``sums`` and ``counts``,
    and the per-sentence outputs in batch order (what a scale-out worker returns)."""
    sums, counts = zero_sums(len(index), teacher.hidden_size)
    found = [accumulate(teacher, texts, index, sums, counts, lowercase, layer, splitter) for texts in batches]
    ids = torch.nonzero(counts).flatten()
    rows = {key: np.concatenate([f[key] for f in found]).astype(kind) for key, kind in PER_SENTENCE.items()}
    return {"ids": ids.numpy(), "sums": sums[ids].numpy(), "counts": counts[ids].numpy(), **rows}


def extract(
    teacher: Teacher,
    sentences: Sequence[str],
    vocab: Sequence[str],
    *,
    lowercase: bool,
    batch_size: int = 32,
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
    rows, done = SentenceRows(len(sentences)), 0
    if checkpoint is not None and checkpoint.is_file():
        sums, counts, saved, done = resume(checkpoint, len(batches))
        rows = SentenceRows(len(sentences), saved)
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
        texts = [sentences[i] for i in chosen]
        rows.put(chosen, accumulate(teacher, texts, index, sums, counts, lowercase, layer, splitter))
        progress.update(len(chosen))
        if checkpoint is not None and time.monotonic() - last_save > save_every:
            save_partial(checkpoint, sums, counts, rows.arrays, number + 1)
            last_save = time.monotonic()
    progress.close()
    if checkpoint is not None:
        save_partial(checkpoint, sums, counts, rows.arrays, len(batches))
    return rows.result(sums, counts)
