"""GloVe (Pennington, Socher and Manning, 2014) trained on the corpus: the third classic baseline.

No maintained package wraps the reference C code (``glove-python`` is unmaintained and does not build on
current Pythons), so this is a compact implementation of the paper, in three resumable steps kept in the
work folder:

1. **vocabulary**: words split exactly as ``encode`` splits text (``sentence_words``), kept when they
   occur ``min_count`` times, the ``vocab_size`` most frequent (ties by word).
2. **co-occurrence**: out-of-vocabulary words are dropped (as the reference ``cooccur`` does), then every
   pair of words at distance d ≤ ``window`` inside a sentence adds 1/d to X[i, j] and to X[j, i]. Chunks
   of sentences become scipy sparse matrices, summed as they come; when the running sum passes
   ``max_pairs`` non-zeros it is written to disk (``.npz``, no pickle) and a new sum begun. The parts are
   added at the end and the matrix is saved (``cooccurrence.npz``): a rerun skips the counting.
3. **training**: J = Σ f(X_ij) (w_i·w̃_j + b_i + b̃_j − log X_ij)², f(x) = min(1, (x / x_max)^α), over the
   non-zero entries, reshuffled each epoch, with the reference ``glove.c``'s update applied record by
   record (``glove_kernel``: its AdaGrad puts η inside the squared-gradient sum, and its biases learn
   without η), on all cores without locks as the reference does. Parameters and sums are saved after
   each epoch (safetensors): a rerun resumes at the next one. The word vector is w + w̃, as in the paper.
   Same seed and one thread, same vectors.
"""

from __future__ import annotations

import logging
import os
import resource
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from staticsem.distillation.checkpoint import Work, fingerprint
from staticsem.distillation.corpus.reading import CorpusOptions, check_sources, fingerprint_sources
from staticsem.distillation.corpus.streams import Sentences, sentence_source
from staticsem.distillation.method import Frame, record
from staticsem.distillation.methods.glove.settings import READING, GloveSettings
from staticsem.errors import InputError
from staticsem.io.atomic import atomic_file, save_tensors
from staticsem.model import StaticModel
from staticsem.version import environment

# what decides a trained model beside its settings and corpus: the training loop's compiler and arithmetic
PACKAGES = ("numpy", "numba")

if TYPE_CHECKING:
    import scipy.sparse

logger = logging.getLogger(__name__)
TRAINER = "2"  # 2: the reference's update record by record (1 was mini-batch AdaGrad at rate η)
_CHUNK_TOKENS = 1 << 18  # in-vocabulary tokens per co-occurrence chunk (× 2 × window entries)


# ---------------------------------------------------------------------- steps 1 and 2: counting
def build_vocabulary(sentences: Iterable[list[str]], min_count: int, vocab_size: int | None) -> list[str]:
    """Words with at least ``min_count`` occurrences, most frequent first (ties by word)."""
    counts: Counter[str] = Counter()
    for words in sentences:
        counts.update(words)
    kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    return kept[:vocab_size]


def _chunk_matrix(ids: list[np.ndarray], window: int, size: int) -> scipy.sparse.csr_matrix:
    """X of one chunk: 1/d for each pair at distance d ≤ window within a sentence, both directions."""
    import scipy.sparse

    flat = np.concatenate(ids)
    sentence = np.repeat(np.arange(len(ids)), [len(x) for x in ids])
    rows, cols, values = [], [], []
    for d in range(1, window + 1):
        same = sentence[:-d] == sentence[d:]
        left, right = flat[:-d][same], flat[d:][same]
        weight = np.full(len(left), 1.0 / d)
        rows += [left, right]
        cols += [right, left]
        values += [weight, weight]
    coo = scipy.sparse.coo_matrix(
        (np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))), shape=(size, size)
    )
    return coo.tocsr()  # duplicates summed


def count_cooccurrences(
    sentences: Iterable[list[str]],
    vocabulary: Sequence[str],
    window: int,
    spill_dir: Path,
    max_pairs: int = 50_000_000,
) -> scipy.sparse.csr_matrix:
    """The symmetric, distance-weighted co-occurrence matrix of ``vocabulary`` over ``sentences``."""
    import scipy.sparse

    index = {word: i for i, word in enumerate(vocabulary)}
    size = len(vocabulary)
    total = scipy.sparse.csr_matrix((size, size), dtype=np.float64)
    spills: list[Path] = []
    chunk: list[np.ndarray] = []
    tokens = 0

    def flush() -> None:
        nonlocal total, chunk, tokens
        if chunk:
            total = total + _chunk_matrix(chunk, window, size)
            chunk, tokens = [], 0
        if total.nnz > max_pairs:  # the running sum goes to disk; a new one begins
            spill_dir.mkdir(parents=True, exist_ok=True)
            spills.append(spill_dir / f"part-{len(spills):04d}.npz")
            _save_npz(spills[-1], total)
            total = scipy.sparse.csr_matrix((size, size), dtype=np.float64)

    for words in sentences:
        ids = np.fromiter((index.get(w, -1) for w in words), dtype=np.int64, count=len(words))
        ids = ids[ids >= 0]
        if len(ids) > 1:
            chunk.append(ids)
            tokens += len(ids)
            if tokens >= _CHUNK_TOKENS:
                flush()
    flush()
    for part in spills:
        total = total + scipy.sparse.load_npz(part)
        part.unlink()
    return total.tocsr()


def _save_npz(path: Path, matrix: scipy.sparse.csr_matrix) -> None:
    import scipy.sparse

    # an open file: given a path without ".npz", save_npz would add it
    with atomic_file(path) as tmp, open(tmp, "wb") as handle:
        scipy.sparse.save_npz(handle, matrix, compressed=False)


# ---------------------------------------------------------------------- step 3: training
class GloveTrainer:
    """The four parameter tables and their AdaGrad sums, trained epoch by epoch as ``glove.c`` does."""

    NAMES = ("w", "w_context", "b", "b_context")

    def __init__(self, size: int, settings: GloveSettings) -> None:
        self.settings = settings
        rng = np.random.default_rng(settings.seed)

        def table(*shape: int) -> np.ndarray:  # the reference's (rand() - 0.5) / dim
            return ((rng.random(shape) - 0.5) / settings.dim).astype(np.float32)

        self.tables = [table(size, settings.dim), table(size, settings.dim), table(size), table(size)]
        self.sums = [np.ones_like(t) for t in self.tables]  # G starts at 1, as in the reference
        self.threads_used = settings.threads or os.cpu_count() or 1

    def epoch(self, rows: np.ndarray, cols: np.ndarray, counts: np.ndarray, number: int) -> float:
        """One pass over the records, shuffled in place from the seed and the epoch number; the mean
        of J's terms f(X)·diff² met on the way."""
        from concurrent.futures import ThreadPoolExecutor

        from staticsem.distillation.methods.glove.kernel import kernels

        s = self.settings
        train, shuffle = kernels()
        shuffle(rows, cols, counts, s.seed * 1_000 + number)
        threads = self.threads_used = max(1, min(s.threads or os.cpu_count() or 1, len(rows)))
        bounds = np.linspace(0, len(rows), threads + 1).astype(np.int64)
        args = (rows, cols, counts, *self.tables, *self.sums, s.lr, s.x_max, s.alpha)
        with ThreadPoolExecutor(threads) as pool:  # the kernel releases the GIL
            costs = pool.map(lambda t: train(*args, int(bounds[t]), int(bounds[t + 1])), range(threads))
            total = sum(costs)
        return float(total) / max(len(rows), 1)

    def vectors(self) -> np.ndarray:
        """w + w̃ (the paper's word vectors; the reference's ``-model 2``)."""
        return self.tables[0] + self.tables[1]

    def state(self) -> dict[str, np.ndarray]:
        arrays = {}
        for name, table, sums in zip(self.NAMES, self.tables, self.sums, strict=True):
            arrays[name], arrays[f"{name}.sum"] = table, sums
        return arrays

    def load(self, arrays: dict[str, np.ndarray]) -> None:
        for k, name in enumerate(self.NAMES):
            self.tables[k] = np.ascontiguousarray(arrays[name], np.float32)
            self.sums[k] = np.ascontiguousarray(arrays[f"{name}.sum"], np.float32)


# ---------------------------------------------------------------------- the method
def distill_glove(
    corpus: Sequence[str],
    *,
    settings: GloveSettings | None = None,
    options: CorpusOptions | None = None,
    work_dir: Path | None = None,
    show_progress: bool = True,
    after_epoch: Callable[[int, float], None] | None = None,
) -> StaticModel:
    """Train GloVe on ``corpus``; with ``work_dir``, each step (and epoch) is kept and a rerun resumes.

    :param after_epoch: called with the epoch number and its mean cost after the epoch is saved.
    :raises InputError: for bad settings, an unusable corpus or no word reaching ``min_count``.
    """
    import tempfile

    settings = settings or GloveSettings()
    settings.validate()
    options = options or CorpusOptions()
    check_sources(corpus)
    started = time.perf_counter()
    sentences = Sentences(sentence_source(corpus, options), settings.lowercase)
    source = {
        "corpus": fingerprint_sources(corpus),
        "options": options.key(),
        "lowercase": settings.lowercase,
    }
    with tempfile.TemporaryDirectory(prefix="staticsem-glove-") as scratch:
        work = Work(work_dir or Path(scratch))
        vocabulary = _vocabulary_step(work, sentences, settings, source, show_progress)
        matrix = _cooccurrence_step(work, sentences, vocabulary, settings, source, show_progress)
        trainer = _train_step(work, matrix, len(vocabulary), settings, show_progress, after_epoch)
    metadata = {
        "method": "glove",
        "trainer": f"staticsem {TRAINER} (numba, the reference's AdaGrad, {trainer.threads_used} threads)",
        "settings": record(settings, corpus=tuple(corpus), corpus_options=options.key()),
        "corpus": source["corpus"],
        "vocabulary": len(vocabulary),
        "cooccurrences": int(matrix.nnz),
        "seconds": round(time.perf_counter() - started, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),  # the process's
        "environment": environment(PACKAGES),
    }
    return StaticModel(vocabulary, trainer.vectors(), metadata=metadata)


def _bar(sentences: Sentences, description: str, show: bool) -> tqdm[Any]:
    bar = tqdm(desc=description, unit=" sent", disable=not show, mininterval=1)
    sentences.progress = bar
    return bar


def _vocabulary_step(
    work: Work, sentences: Sentences, s: GloveSettings, source: dict[str, Any], show: bool
) -> list[str]:
    key = fingerprint({**source, "min_count": s.min_count, "vocab_size": s.vocab_size})
    done = work.done("glove-vocabulary", key)
    if done is not None:
        return list(done["words"])
    with _bar(sentences, "glove: counting words", show):
        words = build_vocabulary(sentences, s.min_count, s.vocab_size)
    if not words:
        raise InputError(
            f"no word occurs min_count={s.min_count} times in the corpus; lower it or give more text"
        )
    return list(work.finish("glove-vocabulary", key, {"words": words})["words"])


def _cooccurrence_step(
    work: Work,
    sentences: Sentences,
    vocabulary: list[str],
    s: GloveSettings,
    source: dict[str, Any],
    show: bool,
) -> scipy.sparse.csr_matrix:
    import scipy.sparse

    key = fingerprint({**source, "window": s.window}, vocabulary)
    path = work.folder / "glove-cooccurrence.npz"
    if work.done("glove-cooccurrence", key) is not None and path.is_file():
        return scipy.sparse.load_npz(path).tocsr()
    with _bar(sentences, "glove: co-occurrences", show):
        matrix = count_cooccurrences(
            sentences, vocabulary, s.window, work.folder / "glove-parts", s.max_pairs
        )
    if matrix.nnz == 0:
        raise InputError("no two vocabulary words share a sentence: give more text or lower min_count")
    _save_npz(path, matrix)
    work.finish("glove-cooccurrence", key, {"nonzeros": int(matrix.nnz)})
    return matrix


def _train_step(
    work: Work,
    matrix: scipy.sparse.csr_matrix,
    size: int,
    s: GloveSettings,
    show: bool,
    after_epoch: Callable[[int, float], None] | None,
) -> GloveTrainer:
    from safetensors.numpy import load_file

    from staticsem.distillation.methods.glove.kernel import kernels

    coo = matrix.tocoo()
    rows, cols = coo.row.astype(np.int32), coo.col.astype(np.int32)
    counts = coo.data.astype(np.float32)
    del coo
    training = {k: v for k, v in asdict(s).items() if k not in ("max_pairs", "threads", *READING)}
    key = fingerprint({**training, "trainer": TRAINER}, [str(matrix.nnz), f"{float(matrix.sum()):.6e}"])
    trainer = GloveTrainer(size, s)
    state_path = work.folder / "glove-training.safetensors"
    record = work.done("glove-training", key)
    first = 0
    if record is not None and state_path.is_file():
        first = int(record["epochs_done"])
        trainer.load(load_file(str(state_path)))
        shuffle = kernels()[1]
        for epoch in range(first):  # the records' order as the uninterrupted run has it
            shuffle(rows, cols, counts, s.seed * 1_000 + epoch)
        logger.info("glove: resuming after epoch %d of %d", first, s.epochs)
    for epoch in tqdm(
        range(first, s.epochs), desc="glove: epochs", disable=not show, initial=first, total=s.epochs
    ):
        cost = trainer.epoch(rows, cols, counts, epoch)
        save_tensors(state_path, trainer.state())
        work.finish("glove-training", key, {"epochs_done": epoch + 1, "cost": cost})
        logger.info("glove epoch %d/%d: cost %.5f", epoch + 1, s.epochs, cost)
        if after_epoch is not None:
            after_epoch(epoch + 1, cost)
    return trainer


def run_glove(settings: GloveSettings, frame: Frame) -> StaticModel:
    """The glove method's run: its steps kept in the work folder (when there is an ``out``)."""
    reading = CorpusOptions(
        max_words=settings.max_words, max_sentences=settings.max_sentences, exclude=settings.exclude
    )
    work_dir = frame.work_folder()
    model = distill_glove(
        settings.corpus,
        settings=settings,
        options=reading,
        work_dir=work_dir,
        show_progress=frame.show_progress,
    )
    if frame.out is not None:
        model.save(frame.out, dtype=frame.dtype)
        if work_dir is not None and not frame.keep_work:
            shutil.rmtree(work_dir, ignore_errors=True)
    return model
