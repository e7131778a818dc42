"""Vocabularies: user word lists (``word`` or ``word<TAB>count`` per line, most frequent first)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from staticsem.distillation.checkpoint import fingerprint
from staticsem.distillation.corpus.reading import CorpusOptions
from staticsem.distillation.corpus.sampling import Split, build_vocabulary, count_words
from staticsem.errors import InputError
from staticsem.lines import numbered_lines
from staticsem.text import split_words

logger = logging.getLogger(__name__)


def read_word_list(path: Path, limit: int | None = None) -> list[str]:
    """Words of a list file in order, de-duplicated; words inference can never produce are skipped.

    :raises InputError: for a missing or non-UTF-8 file, or one without usable words.
    """
    if not path.is_file():
        raise InputError(f"{path}: vocabulary file is missing")
    words: list[str] = []
    seen: set[str] = set()
    skipped = 0
    for _, line in numbered_lines(path):
        word = line.split("\t", 1)[0].strip()
        if not word or word in seen:
            continue
        if split_words(word) != [word]:
            skipped += 1
            continue
        seen.add(word)
        words.append(word)
        if limit is not None and len(words) >= limit:
            break
    if skipped:
        logger.warning(
            "%s: skipped %d entries that are not single words (punctuation or spaces)", path, skipped
        )
    if not words:
        raise InputError(f"{path}: holds no usable words")
    return words


def vocabulary_key(
    corpus_prints: Sequence[dict[str, Any]],
    teacher: str | None,
    size: int,
    min_count: int,
    options: CorpusOptions,
    listed: str | None,
    splitter: str = "words",
) -> str:
    """Key of the vocabulary step: corpus content (not its path), teacher, sizes, splitter, word list."""
    words = [] if listed is None else read_word_list(Path(listed))
    split = {} if splitter == "words" else {"splitter": splitter}  # keys of default runs stay as they were
    return fingerprint(
        {
            "corpus": [p.get("sha256") or p["source"] for p in corpus_prints],
            "teacher": teacher or "default",
            "size": size,
            "min": min_count,
            "options": options.key(),
            **split,
        },
        words,
    )


def vocabulary_step(
    sentences: Iterable[str],
    lowercase: bool,
    size: int,
    min_count: int,
    listed: str | None,
    show_progress: bool = True,
    split: Split | None = None,
    count: Callable[..., tuple[Counter[str], int]] = count_words,
) -> dict[str, Any]:
    """Count the corpus once (with ``count``: ``count_words`` or a cluster's map-reduce); keep the top
    ``size`` words (or the listed ones) with their counts."""
    counts, total = count(sentences, lowercase, show_progress, split)
    return vocabulary_record(counts, total, lowercase, size, min_count, listed)


def listed_words(listed: str | None, lowercase: bool) -> list[str] | None:
    """The words of the list file ``listed`` (``--vocabulary``) as the vocabulary reads them, or None."""
    words = None if listed is None else read_word_list(Path(listed))
    if words is not None and lowercase:
        words = list(dict.fromkeys(w.lower() for w in words))
    return words


def vocabulary_record(
    counts: Counter[str], total: int, lowercase: bool, size: int, min_count: int, listed: str | None
) -> dict[str, Any]:
    """The vocabulary step's record from the corpus's word ``counts`` (first-seen order) over ``total``
    sentences: the top ``size`` words (or the listed ones) with their counts."""
    vocab = build_vocabulary(counts, size, min_count, listed_words(listed, lowercase))
    return {
        "words": vocab,
        "counts": [counts[w] for w in vocab],
        "sentences": total,
        "tokens": sum(counts.values()),
        "lowercase": lowercase,
    }
