"""Learned subword pieces for unknown words, numpy only.

An SWE model can carry, beside its word rows, one row per piece of its subword tokenizer (the teacher's),
distilled together with the words. A word outside the vocabulary is split into the tokenizer's pieces
(``chloroquine`` → ``ch ##lor ##o ##quin ##e``) and gets their mean, scaled by ``k ** weight`` for a word
of k pieces: ``weight`` 1 makes it count as much as k words in a text's mean (its vector is the sum of its
pieces), 0 as one word. Such vectors keep a rare word's identity (the same pieces give the same vector in
a query and in a document) where the longest known prefix (``ch``) loses it. ``ComposedRows``
(``staticsem.ngrams``) caches them as extra rows numbered from ``V`` on, as for fastText's n-grams.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from staticsem.errors import ModelFormatError

KIND = "pieces"
_STORED_DTYPES = (np.float32, np.float16)


@dataclass(eq=False)
class PieceTable:
    """One row per token id of ``tokenizer`` (P × D, float32 or float16) and the weight of a word's pieces.

    :raises ModelFormatError: for a bad shape, dtype, NaN values, a weight outside 0..1, or a table whose
        rows do not match the tokenizer's vocabulary.
    """

    vectors: np.ndarray
    tokenizer: Tokenizer
    weight: float = 1.0
    lowercase = False  # the tokenizer normalises case itself

    def __post_init__(self) -> None:
        table = self.vectors
        if not isinstance(table, np.ndarray) or table.ndim != 2 or 0 in table.shape:
            raise ModelFormatError(f"the piece table must be a non-empty matrix, shape {np.shape(table)}")
        if table.dtype.type not in _STORED_DTYPES:
            raise ModelFormatError(f"the piece table must be float32 or float16, got {table.dtype}")
        size = self.tokenizer.get_vocab_size(with_added_tokens=True)
        if len(table) != size:
            raise ModelFormatError(
                f"the piece table has {len(table)} rows but the subword tokenizer has {size} tokens"
            )
        if not 0.0 <= self.weight <= 1.0:
            raise ModelFormatError(f"the pieces' weight must be within 0..1, got {self.weight}")
        if not np.isfinite(table).all():
            row = int(np.flatnonzero(~np.isfinite(table).all(axis=1))[0])
            raise ModelFormatError(f"the piece table holds NaN or infinite values (first in piece {row})")
        unknown = getattr(self.tokenizer.model, "unk_token", None)
        self._unknown = None if unknown is None else self.tokenizer.token_to_id(unknown)

    @property
    def dim(self) -> int:
        """Number of dimensions of each piece vector."""
        return int(self.vectors.shape[1])

    def piece_ids(self, word: str) -> np.ndarray:
        """Token ids of ``word``'s pieces (no special tokens, the unknown token left out)."""
        ids = self.tokenizer.encode(word, add_special_tokens=False).ids
        return np.array([i for i in ids if i != self._unknown], dtype=np.int64)

    def scale(self, pieces: int) -> float:
        """Factor on the mean of a word's ``pieces`` rows: ``pieces ** weight``."""
        return float(pieces**self.weight)

    def vector(self, word: str) -> np.ndarray | None:
        """Float32 vector of ``word`` from its pieces; ``None`` when it has none."""
        ids = self.piece_ids(word)
        if ids.size == 0:
            return None
        rows = self.vectors[ids].astype(np.float32)
        return rows.mean(axis=0) * np.float32(self.scale(len(ids)))

    def truncate(self, dim: int) -> PieceTable:
        """The table keeping the first ``dim`` dimensions."""
        return PieceTable(np.ascontiguousarray(self.vectors[:, :dim]), self.tokenizer, self.weight)

    def astype(self, dtype: type[np.floating[Any]]) -> PieceTable:
        """The same table stored as ``dtype`` (float32 or float16)."""
        return PieceTable(self.vectors.astype(dtype), self.tokenizer, self.weight)

    def config(self) -> dict[str, Any]:
        """The ``subwords`` entry of the native ``config.json``."""
        return {"type": KIND, "pieces": len(self.vectors), "weight": self.weight}

    @classmethod
    def from_config(
        cls, config: object, vectors: np.ndarray | None, tokenizer: Tokenizer | None
    ) -> PieceTable:
        """Rebuild a table from its ``subwords`` config entry, the ``pieces`` tensor and the tokenizer."""
        if not isinstance(config, dict) or config.get("type") != KIND:
            raise ModelFormatError(f"'subwords' must be an object with type {KIND!r}, got {config!r}")
        if vectors is None:
            raise ModelFormatError("config.json announces subword pieces but there is no 'pieces' tensor")
        if tokenizer is None:
            raise ModelFormatError(
                "config.json announces subword pieces but the folder has no tokenizer.json"
            )
        if config.get("pieces") != len(vectors):
            raise ModelFormatError(
                f"config.json announces {config.get('pieces')} pieces, the 'pieces' tensor has shape "
                f"{vectors.shape}"
            )
        weight = config.get("weight")
        if not isinstance(weight, (int, float)) or isinstance(weight, bool):
            raise ModelFormatError(f"'subwords' needs a numeric weight, got {weight!r}")
        return cls(vectors, tokenizer, float(weight))
