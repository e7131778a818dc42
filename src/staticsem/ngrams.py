"""fastText sub-word vectors for unknown words, numpy only (no gensim at inference).

A fastText model keeps, beside its word rows, a table of ``buckets`` n-gram vectors: the character
n-grams (``minn``..``maxn`` characters) of ``<word>`` are hashed with fastText's 32-bit FNV-1a into
bucket ids. An unknown word's vector is the mean of its n-gram rows, exactly what gensim's
``FastTextKeyedVectors.get_vector`` returns for an out-of-vocabulary word (a word too short to have an
n-gram gets no vector). ``ComposedRows`` caches those vectors as extra rows numbered from ``V`` on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from staticsem.errors import ModelFormatError

KIND = "fasttext"
_FNV_OFFSET = 2166136261
_FNV_PRIME = 16777619
_MASK = 0xFFFFFFFF
# fastText hashes each byte as a signed char widened to uint32: bytes >= 0x80 get 24 leading one bits.
_SIGNED_BYTE = tuple(b if b < 0x80 else b | 0xFFFFFF00 for b in range(256))
_STORED_DTYPES = (np.float32, np.float16)


def ft_hash(data: bytes) -> int:
    """fastText's FNV-1a hash of ``data`` (gensim's ``ft_hash_bytes``, compatible_hash=True)."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ _SIGNED_BYTE[byte]) * _FNV_PRIME) & _MASK
    return h


def char_ngrams(word: str, minn: int, maxn: int) -> list[str]:
    """The n-grams of ``<word>`` in fastText's order (by start, then length); ``<`` / ``>`` alone are not."""
    wrapped = f"<{word}>"
    end = len(wrapped)
    return [
        wrapped[start : start + n]
        for start in range(end)
        for n in range(minn, min(maxn, end - start) + 1)
        if not (n == 1 and (start == 0 or start + n == end))
    ]


@dataclass(eq=False)
class NgramTable:
    """Bucket table (``buckets`` × D, float32 or float16) and the n-gram lengths of a fastText model.

    :param lowercase: look an unknown word's n-grams up in lower case (the model was trained lower-cased).
    :raises ModelFormatError: for a bad shape, dtype, NaN values or n-gram lengths.
    """

    vectors: np.ndarray
    minn: int = 3
    maxn: int = 6
    lowercase: bool = False

    def __post_init__(self) -> None:
        table = self.vectors
        if not isinstance(table, np.ndarray) or table.ndim != 2 or 0 in table.shape:
            raise ModelFormatError(f"the n-gram table must be a non-empty matrix, shape {np.shape(table)}")
        if table.dtype.type not in _STORED_DTYPES:
            raise ModelFormatError(f"the n-gram table must be float32 or float16, got {table.dtype}")
        if not (isinstance(self.minn, int) and isinstance(self.maxn, int) and 1 <= self.minn <= self.maxn):
            raise ModelFormatError(f"n-gram lengths need 1 <= minn <= maxn, got {self.minn} and {self.maxn}")
        if not np.isfinite(table).all():
            row = int(np.flatnonzero(~np.isfinite(table).all(axis=1))[0])
            raise ModelFormatError(f"the n-gram table holds NaN or infinite values (first in bucket {row})")

    @property
    def buckets(self) -> int:
        """Number of hash buckets (rows of the table)."""
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        """Number of dimensions of each bucket vector."""
        return int(self.vectors.shape[1])

    def ngrams(self, word: str) -> list[str]:
        """The n-grams of ``word`` (as looked up: lower-cased if the table is)."""
        return char_ngrams(word.lower() if self.lowercase else word, self.minn, self.maxn)

    def bucket_ids(self, word: str) -> np.ndarray:
        """Bucket of each n-gram of ``word`` (repeated n-grams repeat, as in fastText)."""
        hashes = [ft_hash(g.encode("utf-8", "surrogatepass")) % self.buckets for g in self.ngrams(word)]
        return np.array(hashes, dtype=np.int64)

    def vector(self, word: str) -> np.ndarray | None:
        """Float32 mean of the n-gram rows of ``word``; ``None`` when it has no n-gram."""
        ids = self.bucket_ids(word)
        if ids.size == 0:
            return None
        return self.vectors[ids].astype(np.float32).sum(axis=0) / np.float32(ids.size)

    def truncate(self, dim: int) -> NgramTable:
        """The table keeping the first ``dim`` dimensions."""
        return NgramTable(np.ascontiguousarray(self.vectors[:, :dim]), self.minn, self.maxn, self.lowercase)

    def astype(self, dtype: type[np.floating[Any]]) -> NgramTable:
        """The same table stored as ``dtype`` (float32 or float16)."""
        return NgramTable(self.vectors.astype(dtype), self.minn, self.maxn, self.lowercase)

    def config(self) -> dict[str, Any]:
        """The ``subwords`` entry of the native ``config.json``."""
        return {
            "type": KIND,
            "minn": self.minn,
            "maxn": self.maxn,
            "buckets": self.buckets,
            "lowercase": self.lowercase,
        }

    @classmethod
    def from_config(cls, config: object, vectors: np.ndarray | None) -> NgramTable:
        """Rebuild a table from its ``subwords`` config entry and the ``ngrams`` tensor."""
        if not isinstance(config, dict) or config.get("type") != KIND:
            raise ModelFormatError(f"'subwords' must be an object with type {KIND!r}, got {config!r}")
        if vectors is None:
            raise ModelFormatError("config.json announces fastText sub-words but there is no 'ngrams' tensor")
        if config.get("buckets") != len(vectors):
            raise ModelFormatError(
                f"config.json announces {config.get('buckets')} n-gram buckets, the 'ngrams' tensor has "
                f"shape {vectors.shape}"
            )
        minn, maxn = config.get("minn"), config.get("maxn")
        if not isinstance(minn, int) or not isinstance(maxn, int):
            raise ModelFormatError(f"'subwords' needs integer minn and maxn, got {minn!r} and {maxn!r}")
        return cls(vectors, minn, maxn, bool(config.get("lowercase", False)))


class Composer(Protocol):
    """A table that composes a vector for an unknown word (``NgramTable``, ``pieces.PieceTable``)."""

    lowercase: bool

    @property
    def dim(self) -> int: ...

    def vector(self, word: str) -> np.ndarray | None: ...


class ComposedRows:
    """Vectors of unknown words composed from n-grams (or pieces), kept as rows ``first``, ``first + 1``, ...

    The float32 storage doubles its capacity when full, so that row ids stay valid while it grows.
    ``clear`` forgets all rows (ids handed out before become invalid).
    """

    def __init__(self, table: Composer, first: int) -> None:
        self.table = table
        self.first = first
        self._rows = np.zeros((16, table.dim), dtype=np.float32)
        self._index: dict[str, int] = {}
        self._words: list[str] = []

    def __len__(self) -> int:
        return len(self._index)

    @property
    def nbytes(self) -> int:
        """Memory held by the composed vectors."""
        return int(self._rows.nbytes)

    def row(self, word: str) -> int | None:
        """Row id of ``word``'s composed vector (made on first use); ``None`` if it has no n-gram."""
        key = word.lower() if self.table.lowercase else word
        found = self._index.get(key)
        if found is not None:
            return found
        vector = self.table.vector(key)
        if vector is None:
            return None
        count = len(self._index)
        if count == len(self._rows):
            grown = np.zeros((2 * count, self.table.dim), dtype=np.float32)
            grown[:count] = self._rows
            self._rows = grown
        self._rows[count] = vector
        self._index[key] = self.first + count
        self._words.append(key)
        return self.first + count

    def word(self, row: int) -> str:
        """The word (as looked up) whose composed vector is ``row``."""
        return self._words[row - self.first]

    def vectors(self, ids: np.ndarray) -> np.ndarray:
        """Float32 vectors of row ids handed out by ``row``."""
        return self._rows[ids - self.first]

    def clear(self) -> None:
        """Forget every composed row."""
        self._rows = np.zeros((16, self.table.dim), dtype=np.float32)
        self._index.clear()
        self._words.clear()
