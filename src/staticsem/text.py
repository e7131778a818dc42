"""Inference tokenisation (METHOD.md §4): BERT-style word splitting and word → row lookup.

Words are maximal runs of characters that are neither whitespace nor punctuation, which is what
``tokenizers.pre_tokenizers.BertPreTokenizer`` yields once its punctuation tokens are dropped.
A word is looked up exactly, then lower-cased; an unknown word then goes to the optional ``fallback``
(fastText models: a row composed from its character n-grams, id >= V), else is split by the attached
subword tokenizer and the longest prefix (whole subwords, trailing ones dropped) found in the vocabulary
is used. Resolved words are cached, so each distinct word is resolved once.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache

import numpy as np
from tokenizers import Tokenizer

from staticsem._punctuation import PUNCTUATION_RANGES, WHITESPACE_RANGES

UNKNOWN = -1
_CACHE_LIMIT = 2_000_000


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges
    )


@lru_cache(maxsize=1)
def word_pattern() -> re.Pattern[str]:
    """Regex matching one word: a run of characters that are neither whitespace nor punctuation."""
    return re.compile(f"[^{_char_class(WHITESPACE_RANGES)}{_char_class(PUNCTUATION_RANGES)}]+")


def split_words(text: str) -> list[str]:
    """Split a text into words, dropping whitespace and punctuation."""
    return word_pattern().findall(text)


class WordLookup:
    """Maps words to rows with the exact → lower-case → fallback → subword-prefix rule.

    :param fallback: row (>= V) for a word neither form of which is in the vocabulary, or ``None``.
    """

    def __init__(
        self,
        vocab: Sequence[str],
        tokenizer: Tokenizer | None = None,
        fallback: Callable[[str], int | None] | None = None,
    ) -> None:
        self.index: dict[str, int] = {word: i for i, word in enumerate(vocab)}
        self.tokenizer = tokenizer
        self.fallback = fallback
        self._cache: dict[str, int] = dict(self.index)

    def forget(self) -> None:
        """Drop the cached resolutions of words outside the vocabulary."""
        self._cache = dict(self.index)

    def _find(self, word: str) -> int | None:
        found = self.index.get(word)
        if found is None:
            found = self.index.get(word.lower())
        return found

    def resolve(self, word: str) -> int:
        """Row of ``word``, or ``UNKNOWN`` (-1) when no rule finds it."""
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        found = self._find(word)
        if found is None and self.fallback is not None:
            found = self.fallback(word)
        if found is None and self.tokenizer is not None:
            offsets = self.tokenizer.encode(word, add_special_tokens=False).offsets
            for end in sorted({stop for _, stop in offsets[:-1]}, reverse=True):
                found = self._find(word[:end]) if end > 0 else None
                if found is not None:
                    break
        if len(self._cache) > _CACHE_LIMIT:
            self.forget()
        self._cache[word] = UNKNOWN if found is None else found
        return self._cache[word]

    def ids(self, texts: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """Flat row ids (``UNKNOWN`` included) and the number of words of each text."""
        findall = word_pattern().findall
        cache = self._cache
        get = cache.get
        resolve = self.resolve
        chunks: list[list[int]] = []
        append = chunks.append
        for text in texts:
            words = findall(text)
            try:
                append([cache[w] for w in words])
            except KeyError:  # only the uncached words go through the slower rule
                append([row if (row := get(w)) is not None else resolve(w) for w in words])
        lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
        flat = np.fromiter(itertools.chain.from_iterable(chunks), dtype=np.int64, count=int(lengths.sum()))
        return flat, lengths
