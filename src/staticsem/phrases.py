"""Phrase rows: multi-word units ("new york", "heart attack", "not good") with rows of their own.

A phrase is a vocabulary entry of two or three words joined by single spaces, the words written as the
vocabulary writes them. A text's words are matched against the phrases longest-first, left to right: at
each word, the longest phrase starting there is taken and matching goes on after it. Only words that follow
each other with nothing but whitespace between them form a phrase ("York, New" and "New-York" do not).
Matching runs on the words' rows (as ``WordLookup`` resolves them), so a phrase follows the vocabulary's
case rule. A matched phrase's row either **replaces** its words' rows (``replace``) or is **added** beside
them (``add``); either way a text stays the mean of its rows.

The same matcher serves encoding, the corpus's phrase counts and stage 1's phrase occurrences
(``PhraseTable.match``), so a phrase is found the same way everywhere. Numpy only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

MODES = ("replace", "add")
DEFAULT_MODE = "add"
MAX_WORDS = 3  # the longest phrase


def is_phrase(entry: str) -> bool:
    """Whether a vocabulary entry is a phrase: words (which never hold whitespace) joined by single spaces."""
    return " " in entry and entry == " ".join(entry.split())


def phrase_words(entry: str) -> list[str]:
    """The words of a phrase entry."""
    return entry.split(" ")


def joined(gap: str) -> bool:
    """Whether two words with ``gap`` between them may form a phrase: only whitespace separates them."""
    return gap.isspace()


def sorted_find(table: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Each of ``keys``' index in the sorted ``table``, -1 where it is absent."""
    if not len(table):
        return np.full(len(keys), -1, np.int64)
    place = np.minimum(np.searchsorted(table, keys), len(table) - 1)
    return np.where(table[place] == keys, place, -1)


def check_mode(mode: str) -> str:
    """``mode`` if it is a phrase mode, else ``ValueError``."""
    if mode not in MODES:
        raise ValueError(f"unknown phrase mode {mode!r}; choose from {', '.join(MODES)}")
    return mode


@dataclass(frozen=True)
class Matches:
    """Phrases found in a flat array of word rows: where each starts, its number of words and its row."""

    starts: np.ndarray  # int64 positions of each phrase's first word
    sizes: np.ndarray  # int64 words of each phrase
    rows: np.ndarray  # int64 the phrase's own row

    def members(self) -> tuple[np.ndarray, np.ndarray]:
        """The position of every word of every phrase, and the number of the phrase it belongs to."""
        phrase = np.repeat(np.arange(len(self.starts)), self.sizes)
        within = np.arange(len(phrase)) - np.repeat(np.cumsum(self.sizes) - self.sizes, self.sizes)
        return self.starts[phrase] + within, phrase


class PhraseTable:
    """A vocabulary's phrases as sequences of word rows (all below ``base``), matched longest-first, left
    to right (``match``), and applied to a text's rows (``apply``).

    :param words: each phrase's word rows (2 to ``MAX_WORDS`` of them, each in ``[0, base)``).
    :param rows: each phrase's own row.
    :param base: the number of word rows (every word row is below it).
    """

    def __init__(self, words: Sequence[Sequence[int]], rows: Sequence[int], base: int) -> None:
        if len(words) != len(rows):
            raise ValueError(f"{len(words)} phrases but {len(rows)} rows")
        self.base = int(base)
        if self.base**MAX_WORDS >= 2**63:
            raise ValueError(f"{base} word rows are too many for phrase keys")
        self.first = np.zeros(self.base, bool)  # word rows that start a phrase
        keys: dict[int, tuple[list[int], list[int]]] = {n: ([], []) for n in range(2, MAX_WORDS + 1)}
        for parts, row in zip(words, rows, strict=True):
            if not 2 <= len(parts) <= MAX_WORDS or not all(0 <= p < self.base for p in parts):
                raise ValueError(f"phrase row {row}: word rows {list(parts)} (2-{MAX_WORDS} below {base})")
            keys[len(parts)][0].append(self._key(parts))
            keys[len(parts)][1].append(int(row))
            self.first[parts[0]] = True
        self.keys: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for size, (found, owners) in keys.items():
            order = np.argsort(found, kind="stable")
            self.keys[size] = (np.asarray(found, np.int64)[order], np.asarray(owners, np.int64)[order])
        self.count = len(rows)

    def _key(self, parts: Sequence[int]) -> int:
        key = 0
        for part in parts:
            key = key * self.base + int(part)
        return key

    def candidates(self, rows: np.ndarray, links: np.ndarray) -> dict[int, np.ndarray]:
        """For each phrase length, the phrase row starting at every position (-1 where none), given
        ``links[i]``: whether word ``i`` may form a phrase with word ``i + 1``."""
        n = len(rows)
        valid = (rows >= 0) & (rows < self.base)
        safe = np.where(valid, rows, 0)
        found: dict[int, np.ndarray] = {}
        start = valid & self.first[safe]
        key = safe.astype(np.int64)
        chain = start.copy()  # positions whose next size-1 words all link on and are word rows
        for size in range(2, MAX_WORDS + 1):
            step = size - 1
            ok = np.zeros(n, bool)
            ok[: n - step] = chain[: n - step] & links[step - 1 : n - 1] & valid[step:]
            chain = ok
            later = np.zeros(n, np.int64)  # the row ``step`` words on
            later[: max(n - step, 0)] = safe[step:]
            key = np.where(ok, key * self.base + later, 0)
            table, owners = self.keys[size]
            row = np.full(n, -1, np.int64)
            if len(table) and ok.any():
                at = np.flatnonzero(ok)
                place = sorted_find(table, key[at])
                hit = place >= 0
                row[at[hit]] = owners[place[hit]]
            found[size] = row
        return found

    def match(self, rows: np.ndarray, links: np.ndarray) -> Matches:
        """The phrases of ``rows`` (flat word rows; ``links`` as in ``candidates``), longest-first, left to
        right: at each position the longest phrase starting there, then on after its last word."""
        rows = np.asarray(rows, np.int64)
        found = self.candidates(rows, np.asarray(links, bool))
        size = np.zeros(len(rows), np.int64)
        row = np.full(len(rows), -1, np.int64)
        for length in range(2, MAX_WORDS + 1):  # longer phrases overwrite shorter ones at a position
            hit = found[length] >= 0
            size[hit], row[hit] = length, found[length][hit]
        starts = np.flatnonzero(size)
        sizes = size[starts]
        if len(starts) > 1 and (starts[1:] < starts[:-1] + sizes[:-1]).any():
            keep, free = [], -1
            for i, (at, length) in enumerate(zip(starts.tolist(), sizes.tolist(), strict=True)):
                if at >= free:
                    keep.append(i)
                    free = at + length
            starts, sizes = starts[keep], sizes[keep]
        return Matches(starts, sizes, row[starts])

    def apply(
        self, rows: np.ndarray, lengths: np.ndarray, matches: Matches, mode: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """Texts' flat rows and lengths with ``matches`` applied: each phrase's row in place of its words'
        (``replace``) or after them (``add``)."""
        if not len(matches.starts):
            return rows, lengths
        owner = np.repeat(np.arange(len(lengths)), lengths)[matches.starts]
        if mode == "add":
            out = np.insert(rows, matches.starts + matches.sizes, matches.rows)
            return out, lengths + np.bincount(owner, minlength=len(lengths))
        keep = np.ones(len(rows), bool)
        keep[matches.members()[0]] = False
        keep[matches.starts] = True
        out = rows.copy()
        out[matches.starts] = matches.rows
        dropped = np.bincount(owner, weights=matches.sizes - 1, minlength=len(lengths)).astype(np.int64)
        return out[keep], lengths - dropped


def entry_table(entries: Sequence[str]) -> PhraseTable | None:
    """The phrases of ``entries`` as a table over the entries' rows, each phrase's words found among the
    entries themselves (``None`` without phrases)."""
    index = {entry: row for row, entry in enumerate(entries)}
    return table_of(entries, lambda word: index.get(word, -1))[0]


def table_of(
    vocab: Sequence[str], resolve: Callable[[str], int], words: int | None = None
) -> tuple[PhraseTable | None, int]:
    """The phrase table of ``vocab`` (its entries holding a space), each phrase's words resolved by
    ``resolve`` (a word's row or -1); ``None`` without phrases. Also returns how many phrases cannot be
    matched (a word without a row of its own).

    :param words: the number of word rows (default: every row that is not a phrase's must be below it).
    """
    entries = [(i, e) for i, e in enumerate(vocab) if is_phrase(e)]
    if not entries:
        return None, 0
    base = len(vocab) if words is None else words
    parts, rows, unmatched = [], [], 0
    for row, entry in entries:
        found = [resolve(w) for w in phrase_words(entry)]
        if 2 <= len(found) <= MAX_WORDS and all(0 <= f < base and not is_phrase(vocab[f]) for f in found):
            parts.append(found)
            rows.append(row)
        else:
            unmatched += 1
    return PhraseTable(parts, rows, base), unmatched
