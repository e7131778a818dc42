"""Which phrases get rows of their own: adjacent words scored as Mikolov et al. (2013) score phrases.

The counting pass stores, beside each sentence's word ids, whether each word is followed by the next with
only whitespace between (``links``). Over those, every run of two (and three) vocabulary words is counted,
and a run is a phrase candidate when it occurs at least ``min_count`` times and

    score(a b) = (count(a b) − δ) · words / (count(a) · count(b))  ≥  threshold

(δ = ``min_count``, ``words`` the corpus's word count: how many times more often the words occur together
than chance would put them side by side). A run of three is scored as a phrase of two and a word, ``(a b)
c`` or ``a (b c)``, where the inner pair is a candidate (Mikolov's second pass). The ``count`` most frequent
candidates are chosen. A user's own list (``--phrases-from``) joins them; its words join the vocabulary.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.distillation.method import setting
from staticsem.errors import InputError
from staticsem.lines import numbered_lines
from staticsem.phrases import DEFAULT_MODE, MAX_WORDS, MODES, PhraseTable, sorted_find
from staticsem.text import split_words

logger = logging.getLogger(__name__)
INITS = ("context", "zero")


@dataclass(frozen=True)
class PhraseSettings:
    """How phrases are chosen and how they count (``--phrase-*``; ``--phrases N`` turns them on)."""

    mode: str = setting(
        DEFAULT_MODE,
        "How a phrase found in a text counts: add (its row beside its words' rows) or replace (its row "
        "instead of theirs).",
    )
    # on the three Wikipedia files (1.49 M sentences) these give 157,971 candidates, 20 / 10 give 47,812
    min_count: int = setting(10, "Corpus occurrences a chosen phrase needs at least (also Mikolov's δ).")
    threshold: float = setting(
        5.0, "Chosen phrases occur together at least this many times more often than chance."
    )
    max_words: int = setting(3, "Words of the longest phrase (2 or 3).")
    per_phrase: int = setting(3, "Occurrences each phrase should get in the chosen sentences.")
    # a phrase's stage-1 state as its starting row costs STS in add mode (40k phrases: 73.01 -> 73.85 without
    # phrases, zero: 73.97; studies/README.md §phrases.py): zero lets distillation add only what it learns
    init: str = setting(
        "zero",
        "A phrase's row before distillation: context (its stage-1 state, as a word's) or zero (it moves a "
        "text only as far as distillation teaches it).",
    )

    def validate(self) -> None:
        """Raise ``InputError`` for settings that cannot work."""
        if self.mode not in MODES:
            raise InputError(f"--phrase-mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.init not in INITS:
            raise InputError(f"--phrase-init must be one of {', '.join(INITS)}, got {self.init!r}")
        if not 2 <= self.max_words <= MAX_WORDS:
            raise InputError(f"--phrase-max-words must be 2 to {MAX_WORDS}, got {self.max_words}")
        for name in ("min_count", "per_phrase"):
            if (value := getattr(self, name)) < 1:
                raise InputError(f"--phrase-{name.replace('_', '-')} must be positive, got {value}")
        if not self.threshold >= 0:
            raise InputError(f"--phrase-threshold must be 0 or more, got {self.threshold}")


def wants_phrases(settings: Any) -> bool:
    """Whether a build asks for phrases (a count or a list)."""
    return bool(getattr(settings, "phrases", 0) or getattr(settings, "phrases_from", None))


def read_phrase_list(path: Path, max_words: int = MAX_WORDS) -> list[list[str]]:
    """The phrases of a list file (one a line: words separated by spaces; blank lines skipped), each as its
    words, de-duplicated in order.

    :raises InputError: naming the file and line, for a missing, unreadable or empty file, or a line of one
        word, of more than ``max_words`` words, or with punctuation inside.
    """
    if not path.is_file():
        raise InputError(f"{path}: phrase list is missing")
    found: dict[tuple[str, ...], None] = {}
    for number, line in numbered_lines(path):
        if not line:
            continue
        words = line.split()
        where = f"{path}:{number}: {line!r}"
        if split_words(line) != words:
            raise InputError(f"{where} holds punctuation (a phrase is words and spaces)")
        if not 2 <= len(words) <= max_words:
            raise InputError(f"{where} has {len(words)} words (a phrase has 2-{max_words})")
        found.setdefault(tuple(words), None)
    if not found:
        raise InputError(f"{path}: holds no phrase")
    return [list(words) for words in found]


@dataclass(frozen=True)
class Runs:
    """The word runs of a corpus as vocabulary rows: the stored corpus's ids mapped to rows (-1 outside the
    vocabulary) and its links, sentence-aligned chunks at a time."""

    rows: np.ndarray  # int64 per word of the corpus
    links: np.ndarray  # bool: the word and the next one may form a phrase

    def ngrams(self, size: int, base: int) -> tuple[np.ndarray, np.ndarray]:
        """Each run of ``size`` vocabulary words as one key (rows in base ``base``), and where it starts."""
        n, rows = len(self.rows), self.rows
        ok = rows[: n - size + 1] >= 0
        key = np.where(ok, rows[: n - size + 1], 0)
        for step in range(1, size):
            ok &= self.links[step - 1 : n - size + step] & (rows[step : n - size + 1 + step] >= 0)
            key = key * base + np.where(ok, rows[step : n - size + 1 + step], 0)
        at = np.flatnonzero(ok)
        return key[at], at


Chunks = Callable[[], Iterator[Runs]]  # the corpus's runs, read afresh at each call


def _counted(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-chunk (keys, counts) merged: each key once, sorted, with its total count."""
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keys, inverse = np.unique(np.concatenate([k for k, _ in parts]), return_inverse=True)
    counts = np.bincount(inverse, weights=np.concatenate([c for _, c in parts]), minlength=len(keys))
    return keys, counts.astype(np.int64)


def count_runs(chunks: Iterator[Runs], size: int, base: int) -> tuple[np.ndarray, np.ndarray]:
    """Counts of every run of ``size`` vocabulary words: sorted keys and their counts."""
    return _counted([np.unique(chunk.ngrams(size, base)[0], return_counts=True) for chunk in chunks])


def _member(table: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Which ``keys`` are in the sorted ``table``."""
    return sorted_find(table, keys) >= 0


def _lookup(table: np.ndarray, counts: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The counts of ``keys`` in (sorted ``table``, ``counts``); 0 where absent."""
    if not len(table):
        return np.zeros(len(keys), np.int64)
    place = sorted_find(table, keys)
    return np.where(place >= 0, counts[place], 0)  # -1 reads the last count, then masked


@dataclass
class Choice:
    """Chosen phrases as word rows (``words``: each phrase's rows), with their corpus counts and scores."""

    words: list[tuple[int, ...]]
    counts: list[int]
    scores: list[float]


def choose(
    chunks: Chunks, word_counts: np.ndarray, total: int, count: int, settings: PhraseSettings
) -> Choice:
    """The ``count`` most frequent phrase candidates (see the module) among the runs of ``chunks()`` (a
    callable giving the corpus's ``Runs`` afresh), the words' corpus counts ``word_counts`` (by row) and
    ``total`` corpus words."""
    base, floor = len(word_counts), settings.min_count
    if count < 1:
        return Choice([], [], [])
    pairs, pair_counts = count_runs(chunks(), 2, base)
    a, b = pairs // base, pairs % base
    counts_ab = pair_counts.astype(np.float64)
    pair_scores = (counts_ab - floor) * total / np.maximum(word_counts[a] * word_counts[b], 1)
    good = (pair_counts >= floor) & (pair_scores >= settings.threshold)
    keys, found, scores = [pairs[good]], [pair_counts[good]], [pair_scores[good]]
    if settings.max_words >= 3 and good.any():
        inner = pairs[good]  # sorted
        triples, triple_counts = _triples(chunks(), base, inner)
        x, y, z = triples // base // base, triples // base % base, triples % base
        c = triple_counts.astype(np.float64) - floor
        left = np.where(
            _member(inner, x * base + y),
            c * total / np.maximum(_lookup(pairs, pair_counts, x * base + y) * word_counts[z], 1),
            -np.inf,
        )
        right = np.where(
            _member(inner, y * base + z),
            c * total / np.maximum(word_counts[x] * _lookup(pairs, pair_counts, y * base + z), 1),
            -np.inf,
        )
        score = np.maximum(left, right)
        good3 = (triple_counts >= floor) & (score >= settings.threshold)
        keys.append(triples[good3] + base**3)  # apart from pairs' keys, which stay below base ** 2
        found.append(triple_counts[good3])
        scores.append(score[good3])
    every, tally, score_of = np.concatenate(keys), np.concatenate(found), np.concatenate(scores)
    order = np.lexsort((every, -tally))  # every candidate, the most frequent first; ties by key
    return Choice(
        [_rows(int(k), base) for k in every[order]], tally[order].tolist(), score_of[order].tolist()
    )


def matched(chunks: Chunks, phrases: Sequence[Sequence[int]], base: int) -> np.ndarray:
    """How often each phrase (word rows below ``base``) is found in the corpus as encoding finds phrases:
    longest first, left to right, so a phrase inside a longer one found there does not count."""
    table = PhraseTable(phrases, range(base, base + len(phrases)), base)
    counts = np.zeros(len(phrases), np.int64)
    for chunk in chunks():
        counts += np.bincount(table.match(chunk.rows, chunk.links).rows - base, minlength=len(phrases))
    return counts


def settle(
    chunks: Chunks, choice: Choice, listed: Sequence[tuple[int, ...]], base: int, count: int, floor: int
) -> tuple[list[tuple[int, ...]], list[int]]:
    """The phrases a build keeps and how often encoding finds each in the corpus: of ``choice``'s candidates,
    the ``count`` that encoding finds most often, each at least ``floor`` times (a pair met only inside a
    longer phrase is found nowhere), then the listed phrases found at all. The candidates are matched a
    pool at a time, the most frequent runs first, the pool doubled until ``count`` of them qualify."""
    size = count + count // 4 + 16
    while True:
        pool = list(dict.fromkeys([*choice.words[:size], *listed]))
        found = dict(zip(pool, matched(chunks, pool, base).tolist(), strict=True))
        candidates = set(choice.words[:size])
        good = [p for p in pool if p in candidates and found[p] >= floor]
        if len(good) >= count or size >= len(choice.words):
            break
        size *= 2
    top = sorted(good, key=lambda p: -found[p])[:count]  # stable: ties keep the runs' order
    kept = list(dict.fromkeys([*top, *(p for p in listed if found[p] > 0)]))
    return kept, matched(chunks, kept, base).tolist() if kept else []


def _triples(chunks: Iterator[Runs], base: int, inner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts of the runs of three words whose first or last two are a candidate pair (``inner``)."""
    parts = []
    for chunk in chunks:
        keys, _ = chunk.ngrams(3, base)
        wanted = _member(inner, keys // base) | _member(inner, keys % (base * base))
        parts.append(np.unique(keys[wanted], return_counts=True))
    return _counted(parts)


def _rows(key: int, base: int) -> tuple[int, ...]:
    """A chosen key's word rows (keys of three words carry ``base ** 3``)."""
    size = 3 if key >= base**3 else 2
    key -= base**3 if size == 3 else 0
    rows = []
    for _ in range(size):
        key, row = divmod(key, base)
        rows.append(row)
    return tuple(reversed(rows))
