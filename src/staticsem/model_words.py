"""Word operations of ``StaticModel``: a word's row and vector, its nearest words, analogies (a mixin, kept
apart from encoding)."""

from __future__ import annotations

import numpy as np

from staticsem.errors import InputError
from staticsem.pieces import PieceTable
from staticsem.quantize import dequantize
from staticsem.text import WordLookup
from staticsem.tokens import TokenLookup


class WordQueries:
    """Neighbours and analogies over a model's rows (``StaticModel`` provides what is declared here)."""

    vocab: list[str]
    vectors: np.ndarray
    scales: np.ndarray | None
    pieces: PieceTable | None
    _lookup: WordLookup | TokenLookup
    _unit_cache: np.ndarray | None

    @property
    def dim(self) -> int:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _unit(self) -> np.ndarray:
        if self._unit_cache is None:
            full = dequantize(self.vectors, self.scales)
            norms = np.linalg.norm(full, axis=1, keepdims=True)
            self._unit_cache = full / np.maximum(norms, np.finfo(np.float32).tiny)
        return self._unit_cache

    def _word_rows(self, word: str) -> list[int]:
        """The rows making up ``word``: its own row, or for token-level models its pieces' rows."""
        rows = self._lookup.rows(word)
        if not rows:
            raise InputError(f"word {word!r} is not in the vocabulary ({len(self)} words)")
        return rows

    def word_index(self, word: str) -> int:
        """Vocabulary row of ``word`` by the inference rule (exact, lower-case, subword prefix; for
        token-level models, the word's single token).

        :raises InputError: when no rule finds the word, or it has no row of its own (a word with only an
            n-gram vector, or split into several tokens).
        """
        rows = self._word_rows(word)
        if len(rows) > 1:
            raise InputError(f"word {word!r} is {len(rows)} tokens of the model's tokenizer, not one row")
        if rows[0] >= len(self.vocab):
            raise InputError(
                f"word {word!r} is not in the vocabulary ({len(self)} words); it has "
                f"{'a vector of its subword pieces' if self.pieces is not None else 'an n-gram vector'} only"
            )
        return rows[0]

    def word_vector(self, word: str) -> np.ndarray:
        """The float32 vector of a word: its row, the mean of its token rows, or its composed (n-gram or
        pieces) vector."""
        return self._rows(np.array(self._word_rows(word))).mean(axis=0, dtype=np.float32)

    def _word_unit(self, word: str) -> tuple[np.ndarray, set[int]]:
        """Unit vector of a word, and the vocabulary rows it is made of (excluded from its neighbours)."""
        rows = self._word_rows(word)
        own = {row for row in rows if row < len(self.vocab)}
        if len(rows) == 1 and own:
            return self._unit()[rows[0]], own
        vector = self.word_vector(word)
        return vector / max(float(np.linalg.norm(vector)), float(np.finfo(np.float32).tiny)), own

    def _nearest(self, query: np.ndarray, k: int, exclude: set[int]) -> list[tuple[str, float]]:
        if k < 1:
            raise InputError(f"k must be positive, got {k}")
        norm = float(np.linalg.norm(query))
        if norm == 0.0:
            return []
        scores = self._unit() @ (query / norm).astype(np.float32)
        take = min(len(scores), k + len(exclude))
        top = np.argpartition(-scores, take - 1)[:take]
        ranked = [int(i) for i in top[np.argsort(-scores[top], kind="stable")] if int(i) not in exclude]
        return [(self.vocab[i], float(scores[i])) for i in ranked[:k]]

    def most_similar(self, word_or_vector: str | np.ndarray, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` vocabulary words closest (cosine) to a word (itself excluded) or to a vector."""
        if isinstance(word_or_vector, str):
            unit, exclude = self._word_unit(word_or_vector)
            return self._nearest(unit, k, exclude)
        query = np.asarray(word_or_vector, dtype=np.float32)
        if query.shape != (self.dim,):
            raise InputError(f"query vector has shape {query.shape}, the model has {self.dim} dims")
        return self._nearest(query, k, set())

    def analogy(self, a: str, b: str, c: str, k: int = 10) -> list[tuple[str, float]]:
        """a : b :: c : ? by 3CosAdd (cos(x, b) − cos(x, a) + cos(x, c)), inputs excluded."""
        (ua, xa), (ub, xb), (uc, xc) = (self._word_unit(w) for w in (a, b, c))
        return self._nearest(ub - ua + uc, k, xa | xb | xc)
