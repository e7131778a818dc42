"""Word similarity (Spearman ×100 of cosine vs gold, with coverage) and analogies (3CosAdd accuracy).

Word similarity asks the encoder for each word as a one-word text, so it measures any encoder; for a
static model a word that gets no vector comes back as a zero row and its pairs count as not covered
(the Spearman is over covered pairs, the coverage says how many that was). Analogies search a word
vocabulary, so they need word vectors: a staticsem ``StaticModel`` (or an encoder exposing one as
``static``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from staticsem.eval.base import (
    Encoder,
    Evaluator,
    NotApplicable,
    embed,
    find_dir,
    find_file,
    read_tsv,
    spearman100,
    with_mean,
)
from staticsem.model import StaticModel

logger = logging.getLogger(__name__)
WORDSIM_DIRS = ("wordsim",)
ANALOGY_DIRS = ("analogy", "wordsim/analogy")


class WordSimilarity(Evaluator):
    """Spearman ×100 between cosine and gold similarity, per file, over the covered pairs.

    :param data_dir: the data folder (or its ``wordsim/`` folder) holding ``word1<TAB>word2<TAB>score``.
    :param files: file names to use; default every ``*.tsv`` there.
    :returns: ``{stem: spearman, f"{stem}_coverage": percent of pairs covered, "mean": mean Spearman}``.
    """

    name = "wordsim"

    def __init__(self, data_dir: str | Path, files: Sequence[str] | None = None) -> None:
        super().__init__()
        if files is None:
            files = [p.name for p in sorted(find_dir(data_dir, WORDSIM_DIRS).glob("*.tsv"))]
        self.pairs = self._read_pairs(data_dir, files, WORDSIM_DIRS, score_column=2)
        self.datasets = list(self.pairs)
        self.settings = {"word vector": "encode([word])", "correlation": "spearman over covered pairs"}

    def __call__(self, encoder: Encoder) -> dict[str, float]:
        words = sorted({w for first, second, _ in self.pairs.values() for w in (*first, *second)})
        vectors = embed(encoder, words)
        row = {w: i for i, w in enumerate(words)}
        covered_word = np.linalg.norm(vectors, axis=1) > 0
        metrics: dict[str, float] = {}
        for stem, (first, second, gold) in self.pairs.items():
            a = np.array([row[w] for w in first])
            b = np.array([row[w] for w in second])
            covered = covered_word[a] & covered_word[b]
            cosine = np.einsum("ij,ij->i", vectors[a], vectors[b])
            metrics[stem] = spearman100(gold[covered], cosine[covered])
            metrics[f"{stem}_coverage"] = 100.0 * float(covered.mean())
        return with_mean(metrics, self.datasets)


def static_of(encoder: Encoder) -> StaticModel:
    """The word-vector model behind ``encoder``.

    :raises NotApplicable: when the encoder has no word vectors (e.g. a Sentence Transformer).
    """
    if isinstance(encoder, StaticModel):
        return encoder
    static = getattr(encoder, "static", None)
    if isinstance(static, StaticModel):
        return static
    raise NotApplicable(f"{type(encoder).__name__} has no word vectors to search")


class Analogy(Evaluator):
    """a : b :: c : ? by 3CosAdd over the whole vocabulary, the three question words excluded.

    Words are looked up exactly, then lower-cased (no subword fallback: a guessed row is not the word).
    A question is covered when all four words are in the vocabulary; accuracy is over covered questions.

    :param data_dir: the data folder (or its analogy folder) holding ``type<TAB>a<TAB>b<TAB>c<TAB>target``.
    :param files: file names; default every ``*.tsv`` there (``google-analogies.tsv``, ``msr.tsv``).
    :param batch_size: questions scored per matrix product.
    :returns: ``{stem: accuracy, f"{stem}_coverage": percent, "mean": mean accuracy}``; for the Google
        set also ``google-analogies_semantic`` / ``_syntactic`` (types starting with ``gram``).
    """

    name = "analogy"

    def __init__(
        self,
        data_dir: str | Path,
        files: Sequence[str] | None = None,
        batch_size: int = 512,
    ) -> None:
        super().__init__()
        if files is None:
            files = [p.name for p in sorted(find_dir(data_dir, ANALOGY_DIRS).glob("*.tsv"))]
        self.batch_size = batch_size
        self.questions: dict[str, list[list[str]]] = {}
        for name in files:
            path = find_file(data_dir, name, ANALOGY_DIRS)
            self.questions[path.stem] = read_tsv(path, 5)
            self._record(path, len(self.questions[path.stem]))
        self.datasets = list(self.questions)
        self.settings = {"method": "3CosAdd", "lookup": "exact, then lower-case"}

    def __call__(self, encoder: Encoder) -> dict[str, float]:
        model = static_of(encoder)
        index = {w: i for i, w in enumerate(model.vocab)}
        unit = _unit_rows(model)
        metrics: dict[str, float] = {}
        for stem, rows in self.questions.items():
            ids = np.array([[_row(index, w) for w in row[1:]] for row in rows], dtype=np.int64).reshape(-1, 4)
            covered = (ids >= 0).all(axis=1)
            correct = np.zeros(len(rows), dtype=bool)
            correct[covered] = self._solve(unit, ids[covered])
            metrics[stem] = 100.0 * float(correct[covered].mean()) if covered.any() else 0.0
            metrics[f"{stem}_coverage"] = 100.0 * float(covered.mean())
            if stem.startswith("google"):
                syntactic = np.array([r[0].startswith("gram") for r in rows])
                for part, mask in (("semantic", ~syntactic), ("syntactic", syntactic)):
                    keep = mask & covered
                    metrics[f"{stem}_{part}"] = 100.0 * float(correct[keep].mean()) if keep.any() else 0.0
        return with_mean(metrics, self.datasets)

    def _solve(self, unit: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Whether 3CosAdd's best word (inputs excluded) is the target, per question."""
        hits = np.zeros(len(ids), dtype=bool)
        for start in range(0, len(ids), self.batch_size):
            block = ids[start : start + self.batch_size]
            query = unit[block[:, 1]] - unit[block[:, 0]] + unit[block[:, 2]]
            scores = query @ unit.T
            rows = np.arange(len(block))[:, None]
            scores[rows, block[:, :3]] = -np.inf
            hits[start : start + len(block)] = scores.argmax(axis=1) == block[:, 3]
        return hits


def _row(index: dict[str, int], word: str) -> int:
    found = index.get(word)
    if found is None:
        found = index.get(word.lower())
    return -1 if found is None else found


def _unit_rows(model: StaticModel) -> np.ndarray:
    from staticsem.quantize import dequantize

    full = dequantize(model.vectors, model.scales).astype(np.float32, copy=False)
    return full / np.maximum(np.linalg.norm(full, axis=1, keepdims=True), np.finfo(np.float32).tiny)
