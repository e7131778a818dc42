"""Teacher contexts for X2Static: the mean last-layer state over each sentence's tokens, one pass each.

In ``sentence`` mode the teacher reads each sentence alone (X2Static_sent). In ``paragraph`` mode it
reads runs of consecutive corpus sentences packed up to ``paragraph_words`` words and each sentence's
context is the mean over its own tokens inside that pass (X2Static_para; consecutive lines of a
one-sentence-per-line corpus are treated as one paragraph). The corpus streams through in chunks; each
finished chunk (contexts as float16, the sentence's vocabulary word ids) is saved, so a rerun resumes
at the first unfinished chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from staticsem.distillation.checkpoint import ChunkStore
from staticsem.distillation.corpus.sampling import Split, sentence_words
from staticsem.distillation.stages.plans import plan_batches
from staticsem.distillation.teachers.teacher import Teacher
from staticsem.text import split_words


def groups(sentences: Iterable[str], context: str, paragraph_words: int) -> Iterator[list[str]]:
    """What the teacher reads at once: single sentences, or consecutive ones up to ``paragraph_words``."""
    if context == "sentence":
        for sentence in sentences:
            yield [sentence]
        return
    group: list[str] = []
    words = 0
    for sentence in sentences:
        size = len(split_words(sentence))
        if group and words + size > paragraph_words:
            yield group
            group, words = [], 0
        group.append(sentence)
        words += size
    if group:
        yield group


def group_contexts(teacher: Teacher, batch: Sequence[list[str]]) -> np.ndarray:
    """Mean last-layer state over each sentence's own tokens, for every sentence of ``batch`` in order."""
    texts = [" ".join(group) for group in batch]
    out = teacher.forward(texts)
    width = out.states.shape[1]
    starts_of = [np.cumsum([0] + [len(s) + 1 for s in group[:-1]]) for group in batch]
    first_row = np.cumsum([0] + [len(group) for group in batch])
    token_start = out.offsets[..., 0].numpy()
    rows = np.full(out.own.shape, -1, dtype=np.int64)
    for b, starts in enumerate(starts_of):
        rows[b] = first_row[b] + np.searchsorted(starts, token_start[b], side="right") - 1
    rows[~out.own.numpy()] = -1
    flat = torch.from_numpy(rows.reshape(-1))
    keep = flat >= 0
    total = int(first_row[-1])
    states = out.states.reshape(len(batch) * width, -1)[keep]
    sums = torch.zeros(total, states.shape[1]).index_add_(0, flat[keep], states)
    tokens = torch.bincount(flat[keep], minlength=total).clamp(min=1)
    return (sums / tokens[:, None]).numpy()


def chunk_arrays(
    teacher: Teacher,
    chunk: list[list[str]],
    index: dict[str, int],
    lowercase: bool,
    batch_size: int,
    split: Split | None = None,
    progress: tqdm | None = None,
) -> dict[str, np.ndarray]:
    """Contexts (float16), vocabulary word ids and per-sentence id counts of one chunk of groups."""
    sentences = [s for group in chunk for s in group]
    contexts = np.zeros((len(sentences), teacher.hidden_size), np.float32)
    first_row = np.cumsum([0] + [len(group) for group in chunk])
    # paragraphs hold several sentences: fewer per batch keeps the padded size alike; sorted by the teacher's
    # token count (less padding than by characters, as in stage 1)
    per_batch = max(1, batch_size * len(chunk) // max(len(sentences), 1))
    for rows in plan_batches(teacher, [" ".join(group) for group in chunk], per_batch):
        found = group_contexts(teacher, [chunk[r] for r in rows])
        targets = np.concatenate([np.arange(first_row[r], first_row[r + 1]) for r in rows])
        contexts[targets] = found
        if progress is not None:
            progress.update(int(first_row[rows + 1].sum() - first_row[rows].sum()))
    ids = [[index[w] for w in sentence_words(s, lowercase, split) if w in index] for s in sentences]
    # a sentence cut off by the teacher's length limit has no tokens: no context, so no targets
    empty: np.ndarray = ~np.any(contexts, axis=1)
    lengths = np.array([0 if empty[i] else len(row) for i, row in enumerate(ids)], np.int64)
    flat = [w for i, row in enumerate(ids) if not empty[i] for w in row]
    return {
        "contexts": contexts.astype(np.float16),
        "ids": np.asarray(flat, np.int64),
        "lengths": lengths,
    }


def extract_contexts(
    teacher: Teacher,
    units: Iterable[list[str]],
    vocab: Sequence[str],
    store: ChunkStore,
    *,
    lowercase: bool,
    chunk_sentences: int = 4096,
    batch_size: int = 64,
    total: int | None = None,
    show_progress: bool = True,
    split: Split | None = None,
) -> dict[str, int]:
    """Fill ``store`` with one chunk per ``chunk_sentences`` sentences; finished chunks are skipped.

    ``split`` is the word splitter's ``words`` (default: the plain word pattern).
    """
    index = {w: i for i, w in enumerate(vocab)}
    progress = tqdm(
        total=total, desc="teacher passes", unit=" sent", disable=not show_progress, mininterval=2
    )
    made = {"chunks": 0, "teacher_passes": 0, "sentences": 0}
    for number, chunk, _ in pending_chunks(units, chunk_sentences, store, progress, made):
        store.save(number, chunk_arrays(teacher, chunk, index, lowercase, batch_size, split, progress))
    progress.close()
    return made


def pending_chunks(
    units: Iterable[list[str]], chunk_sentences: int, store: ChunkStore, progress: tqdm, made: dict[str, int]
) -> Iterator[tuple[int, list[list[str]], int]]:
    """(number, groups, sentences) of each chunk of ``units`` that ``store`` lacks; a finished chunk only
    advances ``progress``. ``made`` counts the chunks, teacher passes and sentences of all chunks."""
    stream = iter(units)
    while chunk := take(stream, chunk_sentences):
        number, size = made["chunks"], sum(len(group) for group in chunk)
        made["chunks"] += 1
        made["teacher_passes"] += len(chunk)
        made["sentences"] += size
        if store.has(number):
            progress.update(size)
            continue
        yield number, chunk, size


def take(stream: Iterator[list[str]], sentences: int) -> list[list[str]]:
    """Groups from ``stream`` until they hold ``sentences`` sentences (or the stream ends)."""
    taken: list[list[str]] = []
    count = 0
    while count < sentences:
        group = next(stream, None)
        if group is None:
            break
        taken.append(group)
        count += len(group)
    return taken
