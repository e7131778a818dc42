"""Inference tokenisation (METHOD.md §4): BERT-style word splitting and word → row lookup.

Words are maximal runs of characters that are neither whitespace nor punctuation, which is what
``tokenizers.pre_tokenizers.BertPreTokenizer`` yields once its punctuation tokens are dropped.
A word is looked up exactly, then lower-cased; an unknown word then goes to the optional ``fallback``
(fastText models: a row composed from its character n-grams, id >= V), else is split by the attached
subword tokenizer and the longest prefix (whole subwords, trailing ones dropped) found in the vocabulary
is used. Resolved words are cached, so each distinct word is resolved once.

Word splitting is pluggable (``register_splitter``): ``words`` is the rule above; ``subword`` keeps it
but cuts runs of scripts written without spaces (Chinese, Japanese, Thai, Lao, Khmer, Myanmar) into the
subword tokenizer's pieces, so that there a word is one teacher piece; ``greedy`` cuts them into the
longest of those pieces that match, left to right, at the speed of plain words (no tokenizer call). A
model records its splitter.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache

import numpy as np
from tokenizers import Tokenizer

from staticsem._punctuation import PUNCTUATION_RANGES, WHITESPACE_RANGES
from staticsem.phrases import DEFAULT_MODE, check_mode, joined, table_of

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


@lru_cache(maxsize=1)
def linked_word_pattern() -> re.Pattern[str]:
    """Regex matching one word and, where only whitespace parts it from the next word, that whitespace (the
    gap ``phrases.joined`` accepts): a match longer than its word links it to the next."""
    space, punctuation = _char_class(WHITESPACE_RANGES), _char_class(PUNCTUATION_RANGES)
    return re.compile(f"[^{space}{punctuation}]+(?:[{space}]+(?=[^{space}{punctuation}]))?")


def split_words(text: str) -> list[str]:
    """Split a text into words, dropping whitespace and punctuation."""
    return word_pattern().findall(text)


def containing_span(
    spans: Sequence[Sequence[tuple[int, int]]], rows: np.ndarray, chars: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which span holds each character position ``chars[i]`` of text ``rows[i]``, given each text's
    sorted, non-overlapping ``(start, end)`` spans; all positions at once.

    :returns: each position's span number in the flat list of all texts' spans (-1 where no span holds
        it), those spans as one ``n × 2`` array, and the text of each span.
    """
    flat = np.asarray([pair for found in spans for pair in found], np.int64).reshape(-1, 2)
    owner = np.repeat(np.arange(len(spans)), [len(found) for found in spans])
    rows, chars = np.asarray(rows, np.int64), np.asarray(chars, np.int64)
    # one key line for all texts: text * stride + character, longer than any text
    stride = int(max(flat[:, 1].max(initial=0), chars.max(initial=0))) + 1
    keys = rows * stride + chars
    span = np.searchsorted(owner * stride + flat[:, 0], keys, side="right") - 1
    inside = (span >= 0) & (chars >= 0)
    inside[inside] = keys[inside] < owner[span[inside]] * stride + flat[span[inside], 1]
    return np.where(inside, span, -1), flat, owner


def overlapping_span(
    spans: Sequence[Sequence[tuple[int, int]]], rows: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first span that each character range ``starts[i]:ends[i]`` of text ``rows[i]`` overlaps (an empty
    range: the span holding its position), given each text's sorted, non-overlapping ``(start, end)`` spans.

    A teacher token belongs to the first word it covers: a byte-level or SentencePiece token may begin with
    punctuation (``"Music``, ``(loudly``), and one of whitespace alone (kept empty, at the next character)
    marks the word after it. Returns what ``containing_span`` returns.
    """
    flat = np.asarray([pair for found in spans for pair in found], np.int64).reshape(-1, 2)
    owner = np.repeat(np.arange(len(spans)), [len(found) for found in spans])
    rows = np.asarray(rows, np.int64)
    starts = np.maximum(np.asarray(starts, np.int64), 0)
    ends = np.maximum(np.asarray(ends, np.int64), starts + 1)  # an empty range: its one position
    stride = int(max(flat[:, 1].max(initial=0), ends.max(initial=0))) + 1
    # the text's first span ending after the range starts; it overlaps when it starts before the range ends
    span = np.searchsorted(owner * stride + flat[:, 1], rows * stride + starts, side="right")
    found = span < len(flat)
    found[found] = (owner[span[found]] == rows[found]) & (flat[span[found], 0] < ends[found])
    return np.where(found, span, -1), flat, owner


# Scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, kana, CJK ideographs
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]+"
)


def word_count(text: str) -> int:
    """Words of ``text`` for length limits: each character of an unspaced script counts as one."""
    extra = sum(len(run) - 1 for run in _UNSPACED.findall(text))
    return len(word_pattern().findall(text)) + extra


class WordSplitter:
    """The default rule: words are runs of characters that are neither whitespace nor punctuation."""

    name = "words"

    def __init__(self) -> None:
        self._findall = word_pattern().findall

    def words(self, text: str) -> list[str]:
        """The words of ``text``."""
        return self._findall(text)  # type: ignore[no-any-return]

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Start and end of every word of ``text``."""
        return [m.span() for m in word_pattern().finditer(text)]


class SubwordSplitter(WordSplitter):
    """Words as ``WordSplitter``, except that runs of unspaced scripts become the tokenizer's pieces."""

    name = "subword"

    def __init__(self, tokenizer: Tokenizer) -> None:
        super().__init__()
        self.tokenizer = tokenizer

    def words(self, text: str) -> list[str]:
        if _UNSPACED.search(text) is None:  # most texts: plain words
            return self._findall(text)  # type: ignore[no-any-return]
        return [text[a:b] for a, b in self.spans(text)]

    def spans(self, text: str) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        for start, end in super().spans(text):
            word, at = text[start:end], 0
            for run in _UNSPACED.finditer(word):
                if run.start() > at:
                    spans.append((start + at, start + run.start()))
                spans.extend(self._pieces(run.group(), start + run.start()))
                at = run.end()
            if at < len(word):
                spans.append((start + at, end))
        return spans

    def _pieces(self, run: str, offset: int) -> list[tuple[int, int]]:
        """The tokenizer's pieces of ``run`` as non-overlapping, non-empty character spans."""
        pieces: list[tuple[int, int]] = []
        done = 0
        for a, b in self.tokenizer.encode(run, add_special_tokens=False).offsets:
            a = max(a, done)
            if b > a:
                pieces.append((offset + a, offset + b))
                done = b
        if done < len(run):  # characters the tokenizer dropped stay one word
            pieces.append((offset + done, offset + len(run)))
        return pieces


class GreedySplitter(SubwordSplitter):
    """Words as ``WordSplitter``, except that runs of unspaced scripts become the longest of the tokenizer's
    pieces that match, left to right (forward maximum matching; a character no piece starts with is one
    word). Pieces mostly as ``SubwordSplitter``'s, at the speed of plain words: no tokenizer call."""

    name = "greedy"

    def __init__(self, tokenizer: Tokenizer) -> None:
        super().__init__(tokenizer)
        pieces = (t.removeprefix("##").removeprefix("\u2581") for t in tokenizer.get_vocab())
        self.pieces = {t for t in pieces if t and _UNSPACED.fullmatch(t)}
        lengths: dict[str, set[int]] = {}
        for piece in self.pieces:
            if len(piece) > 1:
                lengths.setdefault(piece[0], set()).add(len(piece))
        # first character -> the lengths of the longer pieces it starts, longest first
        self.lengths = {first: sorted(found, reverse=True) for first, found in lengths.items()}
        self._runs: dict[str, list[str]] = {}  # runs cut before (as WordLookup caches words)

    def words(self, text: str) -> list[str]:
        if _UNSPACED.search(text) is None:  # most texts: plain words
            return self._findall(text)  # type: ignore[no-any-return]
        found: list[str] = []
        cut, cache = self._cut, self._runs
        for word in self._findall(text):
            at = 0
            for run in _UNSPACED.finditer(word):
                if run.start() > at:
                    found.append(word[at : run.start()])
                text_run = run.group()
                pieces = cache.get(text_run)
                if pieces is None:
                    if len(cache) > _CACHE_LIMIT:
                        cache.clear()
                    pieces = cache[text_run] = cut(text_run)
                found += pieces
                at = run.end()
            if at < len(word):
                found.append(word[at:])
        return found

    def _cut(self, run: str) -> list[str]:
        """The pieces of an unspaced ``run``, longest match first."""
        cut: list[str] = []
        pieces, lengths, at, end = self.pieces, self.lengths, 0, len(run)
        while at < end:
            piece = run[at]
            for size in lengths.get(piece, ()):
                if at + size <= end and run[at : at + size] in pieces:
                    piece = run[at : at + size]
                    break
            cut.append(piece)
            at += len(piece)
        return cut

    def _pieces(self, run: str, offset: int) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        for piece in self._cut(run):
            spans.append((offset, offset + len(piece)))
            offset += len(piece)
        return spans


SPLITTERS: dict[str, Callable[[Tokenizer | None], WordSplitter]] = {}


def register_splitter(name: str, factory: Callable[[Tokenizer | None], WordSplitter]) -> None:
    """Make ``factory(subword_tokenizer)`` available as the word splitter ``name``."""
    SPLITTERS[name] = factory


def _subword(tokenizer: Tokenizer | None) -> WordSplitter:
    if tokenizer is None:
        raise ValueError("the subword splitter needs a subword tokenizer")
    return SubwordSplitter(tokenizer)


def _greedy(tokenizer: Tokenizer | None) -> WordSplitter:
    if tokenizer is None:
        raise ValueError("the greedy splitter needs a subword tokenizer")
    return GreedySplitter(tokenizer)


register_splitter("words", lambda tokenizer: WordSplitter())
register_splitter("subword", _subword)
register_splitter("greedy", _greedy)
BUILTIN_SPLITTERS = (
    "words",
    "subword",
    "greedy",
)  # known to every process (others are registered at run time)


def make_splitter(name: str, tokenizer: Tokenizer | None = None) -> WordSplitter:
    """The registered splitter ``name``; ``ValueError`` for unknown names or a missing tokenizer."""
    if name not in SPLITTERS:
        raise ValueError(f"unknown word splitter {name!r}; registered: {', '.join(sorted(SPLITTERS))}")
    return SPLITTERS[name](tokenizer)


class WordLookup:
    """Maps words to rows with the exact → lower-case → fallback → subword-prefix rule.

    :param fallback: row (>= V) for a word neither form of which is in the vocabulary, or ``None``.
    :param phrases: how the vocabulary's phrases (entries of several words, ``staticsem.phrases``) count
        in a text: ``replace`` their words' rows or ``add`` beside them; ignored without phrases.
    """

    def __init__(
        self,
        vocab: Sequence[str],
        tokenizer: Tokenizer | None = None,
        fallback: Callable[[str], int | None] | None = None,
        splitter: WordSplitter | None = None,
        phrases: str = DEFAULT_MODE,
    ) -> None:
        self.index: dict[str, int] = {word: i for i, word in enumerate(vocab)}
        self.tokenizer = tokenizer
        self.fallback = fallback
        self.splitter = splitter or WordSplitter()
        self.forget()
        self.phrase_mode = check_mode(phrases)
        self.phrases, self.unmatched_phrases = table_of(vocab, self._row)

    def forget(self) -> None:
        """Drop the cached resolutions of words outside the vocabulary."""
        self._cache = dict(self.index)
        self._linked: dict[str, int] = {}  # a word and its link to the next → row * 4 + own * 2 + link

    def _linked_code(self, found: str) -> int:
        """``row * 4 + own * 2 + link`` of a ``linked_word_pattern`` match: its word's row, whether that is
        the word's own row (exact or lower-case: not the subword fallback's) and whether it links to the
        next word."""
        word = word_pattern().match(found).group()  # type: ignore[union-attr]
        if len(self._linked) > _CACHE_LIMIT:
            self._linked.clear()
        own = self._find(word) is not None
        code = self._linked[found] = self.resolve(word) * 4 + own * 2 + (len(word) < len(found))
        return code

    def _find(self, word: str) -> int | None:
        found = self.index.get(word)
        if found is None:
            found = self.index.get(word.lower())
        return found

    def _row(self, word: str) -> int:
        """Row of ``word`` itself (exact or lower-case), or ``UNKNOWN``: no fallback, no prefix."""
        found = self._find(word)
        return UNKNOWN if found is None else found

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

    def rows(self, word: str) -> list[int]:
        """``[row]`` of ``word``, or ``[]`` when no rule finds it."""
        row = self.resolve(word)
        return [] if row == UNKNOWN else [row]

    def ids(self, texts: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """Flat row ids (``UNKNOWN`` included) and the number of rows of each text: a row per word, and with
        phrases each matched phrase's row in place of its words' or beside them."""
        if self.phrases is None:
            return self._word_ids(map(self.splitter.words, texts))
        texts = list(texts)
        if type(self.splitter) is WordSplitter:  # words, their own rows and links in one pass
            codes, lengths = self._word_ids(map(linked_word_pattern().findall, texts), linked=True)
            flat, own, links = codes >> 2, (codes & 2).astype(bool), (codes & 1).astype(bool)
            links[:-1] &= own[:-1] & own[1:]
        else:
            flat, lengths = self._word_ids(map(self.splitter.words, texts))
            links = self.links(texts, flat, lengths)
        owner = np.repeat(np.arange(len(lengths)), lengths)
        links[:-1] &= owner[1:] == owner[:-1]  # never from one text into the next
        links[-1:] = False
        matches = self.phrases.match(flat, links)
        return self.phrases.apply(flat, lengths, matches, self.phrase_mode)

    def links(self, texts: Sequence[str], flat: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """``links[i]``: whether word ``i`` of the flat words of ``texts`` may form a phrase with the next one
        (the same text, only whitespace between them, both with rows of their own: a word resolved by the
        subword fallback breaks a phrase). Only positions where a phrase could start are looked at in the
        text; elsewhere it is whether the next word is in the same text."""
        assert self.phrases is not None
        owner = np.repeat(np.arange(len(lengths)), lengths)
        links = np.zeros(len(flat), bool)
        links[:-1] = owner[1:] == owner[:-1]
        found = self.phrases.candidates(flat, links)
        # the links a phrase starting at each candidate position would need
        needed = [(np.flatnonzero(found[n] >= 0)[:, None] + np.arange(n - 1)).ravel() for n in found]
        check = np.unique(np.concatenate(needed))
        if not len(check):
            return links
        first = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        spans: tuple[int, list[tuple[int, int]]] = (-1, [])
        for at in check.tolist():
            text = int(owner[at])
            if spans[0] != text:
                spans = (text, self.splitter.spans(texts[text]))
            k, found_in = at - int(first[text]), texts[text]
            (a, b), (c, d) = spans[1][k], spans[1][k + 1]
            own = self._find(found_in[a:b]) is not None and self._find(found_in[c:d]) is not None
            links[at] = own and joined(found_in[b:c])
        return links

    def _word_ids(self, split: Iterable[list[str]], linked: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Flat row ids (``UNKNOWN`` included) and the number of words of each text, from their words (with
        ``linked``, from ``linked_word_pattern``'s matches: each ``row * 4 + own * 2 + link``)."""
        cache = self._linked if linked else self._cache
        get = cache.get
        resolve = self._linked_code if linked else self.resolve
        chunks: list[list[int]] = []
        append = chunks.append
        for words in split:
            try:
                append([cache[w] for w in words])
            except KeyError:  # only the uncached words go through the slower rule
                append([row if (row := get(w)) is not None else resolve(w) for w in words])
        lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
        flat = np.fromiter(itertools.chain.from_iterable(chunks), dtype=np.int64, count=int(lengths.sum()))
        return flat, lengths
