"""Vocabularies: user word lists (``word`` or ``word<TAB>count`` per line, most frequent first)."""

from __future__ import annotations

import logging
from pathlib import Path

from staticsem.errors import InputError
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
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise InputError(f"{path}:{number}: not valid UTF-8") from None
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
