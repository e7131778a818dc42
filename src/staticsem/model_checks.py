"""The checks that a model's parts fit together (``StaticModel``'s constructor runs them)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tokenizers import Tokenizer

from staticsem.errors import ModelFormatError
from staticsem.ngrams import NgramTable
from staticsem.pieces import PieceTable
from staticsem.tokens import TokenRules, check_vocabulary

STORED_DTYPES = (np.float32, np.float16, np.int8)


def check_parts(
    vocab: Sequence[str],
    vectors: np.ndarray,
    scales: np.ndarray | None,
    tokenizer: Tokenizer | None,
    ngrams: NgramTable | None,
    pieces: PieceTable | None,
    tokens: TokenRules | None,
) -> None:
    """Raise ``ModelFormatError`` (with the numbers) when the parts of a model do not fit together: the
    matrix's shape, dtype and values, the vocabulary, int8 scales, and the n-gram, piece or token rules."""
    if not isinstance(vectors, np.ndarray) or vectors.ndim != 2:
        raise ModelFormatError(f"the matrix must be 2-dimensional, got shape {np.shape(vectors)}")
    if vectors.dtype.type not in STORED_DTYPES:
        raise ModelFormatError(f"the matrix must be float32, float16 or int8, got {vectors.dtype}")
    if len(vocab) != vectors.shape[0]:
        raise ModelFormatError(
            f"vocabulary has {len(vocab)} words but the matrix has {vectors.shape[0]} rows"
        )
    if vectors.shape[1] == 0:
        raise ModelFormatError("the matrix has 0 dimensions")
    if tokens is not None:
        if tokenizer is None or ngrams is not None:
            raise ModelFormatError("a token-level model needs its tokenizer and has no n-gram table")
        check_vocabulary(vocab, tokenizer)
    elif any(not isinstance(w, str) or not w for w in vocab):
        raise ModelFormatError("vocabulary words must be non-empty strings")
    if len(set(vocab)) != len(vocab):
        seen: set[str] = set()
        dup = next(w for w in vocab if w in seen or seen.add(w))  # type: ignore[func-returns-value]
        raise ModelFormatError(f"vocabulary word {dup!r} occurs more than once")
    if vectors.dtype != np.int8 and not np.isfinite(vectors).all():
        row = int(np.flatnonzero(~np.isfinite(vectors).all(axis=1))[0])
        raise ModelFormatError(
            f"the matrix holds NaN or infinite values (first in row {row}, word {vocab[row]!r})"
        )
    if (scales is None) != (vectors.dtype != np.int8):
        raise ModelFormatError("int8 matrices need per-row scales, and only int8 matrices have them")
    if scales is not None and (scales.shape != (len(vocab),) or not np.isfinite(scales).all()):
        raise ModelFormatError(f"int8 scales must be {len(vocab)} finite values, got shape {scales.shape}")
    if ngrams is not None and ngrams.dim != vectors.shape[1]:
        raise ModelFormatError(
            f"the n-gram table has {ngrams.dim} dimensions but the matrix has {vectors.shape[1]}"
        )
    if pieces is not None:
        if ngrams is not None or tokens is not None:
            raise ModelFormatError("subword pieces go with a word-level model without an n-gram table")
        if pieces.tokenizer is not tokenizer:
            raise ModelFormatError("the piece table must use the model's own subword tokenizer")
        if pieces.dim != vectors.shape[1]:
            raise ModelFormatError(
                f"the piece table has {pieces.dim} dimensions but the matrix has {vectors.shape[1]}"
            )
