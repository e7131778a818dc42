"""Vocabulary counting and sentence selection that shares teacher passes between words.

The reference recipe runs the teacher once per (word, sentence): V × N passes. One pass over a
sentence yields every vocabulary word in it, so ``select_sentences`` streams the corpus once and
keeps a sentence when the words it would fill are *urgent*: for each under-filled word w,
``need(w) / remaining(w)`` is the share of w's remaining corpus occurrences still needed. A sentence
is kept when these shares add up to at least ``threshold``. Rare words (every occurrence needed)
are always taken; frequent words mostly fill up for free inside sentences taken for rarer ones, and
take their last needed occurrences near the end of the stream.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from staticsem.errors import InputError
from staticsem.text import SPLITTERS, word_pattern

if TYPE_CHECKING:
    from staticsem.distillation.corpus.stored import StoredCorpus
    from staticsem.phrases import PhraseTable

logger = logging.getLogger(__name__)


Split = Callable[[str], list[str]]


def check_splitter(name: str) -> None:
    """Raise ``InputError`` unless ``name`` is a registered word splitter."""
    if name not in SPLITTERS:
        raise InputError(f"unknown word splitter {name!r}; choose from {', '.join(sorted(SPLITTERS))}")


def sentence_words(sentence: str, lowercase: bool, split: Split | None = None) -> list[str]:
    """Words of a sentence as the vocabulary sees them (``split``: the word splitter's ``words``)."""
    words = (split or word_pattern().findall)(sentence)
    return [w.lower() for w in words] if lowercase else words


def count_words(
    sentences: Iterable[str], lowercase: bool, show_progress: bool = True, split: Split | None = None
) -> tuple[Counter[str], int]:
    """Word counts over a sentence stream, and the number of sentences."""
    counts: Counter[str] = Counter()
    total = 0
    for sentence in tqdm(
        sentences, desc="counting words", unit=" sent", disable=not show_progress, mininterval=2
    ):
        counts.update(sentence_words(sentence, lowercase, split))
        total += 1
    if total == 0:
        raise InputError("the corpus holds no usable sentence (empty, or no line within the word limits)")
    return counts, total


def missing_words(
    sentences: Iterable[str], known: set[str], least: int, lowercase: bool, split: Split | None = None
) -> list[str]:
    """Words of ``sentences`` seen ``least`` times or more and not in ``known``, sorted."""
    counts, _ = count_words(sentences, lowercase, False, split)
    return sorted(w for w, c in counts.items() if c >= least and w not in known)


def build_vocabulary(
    counts: Counter[str], size: int, min_count: int, words: Sequence[str] | None = None
) -> list[str]:
    """The ``size`` most frequent words with ``min_count`` or more occurrences, or the listed ``words`` found.

    :raises InputError: when no word qualifies.
    """
    if words is not None:
        found = [w for w in words if counts.get(w, 0) >= min_count]
        missing = len(words) - len(found)
        if missing:
            logger.warning(
                "%d of %d listed words occur fewer than %d times in the corpus; they are left out",
                missing,
                len(words),
                min_count,
            )
        vocab = found[:size]
    else:
        vocab = [w for w, c in counts.most_common(size) if c >= min_count]
    if not vocab:
        raise InputError(f"no vocabulary word occurs at least {min_count} times in the corpus")
    return vocab


@dataclass
class Selection:
    """Sentences chosen for the teacher and what they cover."""

    sentences: list[str]
    fill: np.ndarray  # occurrences of each vocabulary word in the chosen sentences
    seen: int  # sentences read
    targets: np.ndarray  # occurrences each vocabulary word should get
    stats: dict[str, float] = field(default_factory=dict)


def word_targets(
    words: int, per_word: int, rare_after: int | None = None, per_rare_word: int = 0
) -> list[int]:
    """Occurrences each of ``words`` vocabulary words (most frequent first) should get: ``per_word``, and
    ``per_rare_word`` for the words ranked after ``rare_after`` (rare words bring their own sentences, so
    they cost a pass per occurrence)."""
    if rare_after is None or rare_after >= words:
        return [per_word] * words
    return [per_word] * rare_after + [min(per_word, per_rare_word)] * (words - rare_after)


class Chooser:
    """The sentence choice's state: each word's remaining corpus occurrences, its target and its fill.

    ``offer`` takes the vocabulary rows of the next sentence of the stream (in order, repeats kept) and says
    whether the sentence is chosen (see the module's rule).
    """

    def __init__(
        self, vocab: Sequence[str], counts: Mapping[str, int], per_word: int | Sequence[int], threshold: float
    ) -> None:
        self.remaining = [counts.get(w, 0) for w in vocab]
        self.need = [per_word] * len(vocab) if isinstance(per_word, int) else list(per_word)
        if len(self.need) != len(vocab):
            raise ValueError(f"{len(self.need)} targets for {len(vocab)} words")
        self.fill = [0] * len(vocab)
        self.threshold, self.seen, self.chosen = threshold, 0, 0

    def offer(self, ids: list[int]) -> bool:
        """Whether the sentence whose vocabulary rows are ``ids`` is chosen (and count it as read)."""
        self.seen += 1
        if not ids:
            return False
        fill, need, remaining = self.fill, self.need, self.remaining
        urgency = 0.0
        for i in set(ids):
            if fill[i] < need[i]:
                urgency += (need[i] - fill[i]) / max(remaining[i], 1)
        for i in ids:
            remaining[i] -= 1
        if urgency < self.threshold:
            return False
        for i in ids:
            fill[i] += 1
        self.chosen += 1
        return True

    def selection(self, chosen: list[str]) -> Selection:
        """The chosen ``sentences`` with what they cover."""
        filled, targets = np.asarray(self.fill, dtype=np.int64), np.asarray(self.need, dtype=np.int64)
        reference = int(targets.sum())  # the reference recipe's passes: one per (word, occurrence)
        stats = {
            "sentences_read": self.seen,
            "sentences_chosen": len(chosen),
            "reference_passes": reference,
            "pass_ratio": len(chosen) / max(reference, 1),
            "words_seen": int((filled > 0).sum()),
            "words_full": int((filled >= targets).sum()),
            "median_fill": float(np.median(filled)),
        }
        logger.info(
            "chose %d of %d sentences (%.1f %% of the V×N=%d reference passes)",
            len(chosen),
            self.seen,
            100 * stats["pass_ratio"],
            reference,
        )
        return Selection(chosen, filled, self.seen, targets, stats)


def select_sentences(
    sentences: Iterable[str],
    vocab: Sequence[str],
    counts: Mapping[str, int],
    per_word: int | Sequence[int],
    lowercase: bool,
    threshold: float = 1.0,
    show_progress: bool = True,
    split: Split | None = None,
) -> Selection:
    """Choose sentences so that each vocabulary word gets about ``per_word`` occurrences (one number, or
    one per word: ``word_targets``)."""
    index = {w: i for i, w in enumerate(vocab)}
    chooser = Chooser(vocab, counts, per_word, threshold)
    chosen: list[str] = []
    progress = tqdm(
        sentences, desc="choosing sentences", unit=" sent", disable=not show_progress, mininterval=2
    )
    for sentence in progress:
        if chooser.offer([index[w] for w in sentence_words(sentence, lowercase, split) if w in index]):
            chosen.append(sentence)
            if show_progress and len(chosen) % 5000 == 0:
                progress.set_postfix(chosen=len(chosen))
    return chooser.selection(chosen)


def select_stored(
    stored: StoredCorpus,
    vocab: Sequence[str],
    counts: Mapping[str, int],
    per_word: int | Sequence[int],
    threshold: float = 1.0,
    show_progress: bool = True,
    phrases: PhraseTable | None = None,
) -> Selection:
    """``select_sentences`` over a stored corpus: its word ids stand for the words (no text is read but
    the chosen sentences); with ``phrases`` (a table over ``vocab``'s rows), a sentence's phrases count as
    its words do."""
    chooser = Chooser(vocab, counts, per_word, threshold)
    rows = tqdm(
        stored.rows(vocab, phrases),
        desc="choosing sentences",
        unit=" sent",
        total=stored.sentences,
        disable=not show_progress,
        mininterval=2,
    )
    numbers = [number for number, ids in enumerate(rows) if chooser.offer(ids)]
    return chooser.selection(list(stored.texts(numbers)))


def sample_sentences(sentences: Iterable[str], count: int, exclude: set[str], seed: int) -> list[str]:
    """``count`` of ``sentences`` (none in ``exclude``) drawn uniformly in one pass (reservoir sampling)."""
    rng, kept, seen = np.random.default_rng(seed), [], 0
    for sentence in sentences:
        if sentence in exclude:
            continue
        if seen < count:
            kept.append(sentence)
        elif (slot := int(rng.integers(seen + 1))) < count:
            kept[slot] = sentence
        seen += 1
    return kept
