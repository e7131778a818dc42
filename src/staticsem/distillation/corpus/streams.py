"""Restartable streams of word lists over a corpus, as gensim and GloVe read it (once per epoch).

Sentences are split into words exactly as the runtime splits text (``sentence_words``), so a vocabulary
built from them matches what ``StaticModel.encode`` looks up. stdin (``-``) can be read only once, so a
corpus that includes it is kept in memory (as sentence strings).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tqdm.auto import tqdm

from staticsem.distillation.corpus.reading import CorpusOptions, iter_sentences
from staticsem.distillation.corpus.sampling import sentence_words

logger = logging.getLogger(__name__)
_TICK = 1024  # sentences between progress-bar updates


class Sentences:
    """Restartable iterable of word lists, as gensim wants it; ``progress`` counts the sentences read."""

    def __init__(self, read: Callable[[], Iterator[str]], lowercase: bool) -> None:
        self.read = read
        self.lowercase = lowercase
        self.progress: tqdm[Any] | None = None

    def __iter__(self) -> Iterator[list[str]]:
        unreported = 0
        for sentence in self.read():
            yield sentence_words(sentence, self.lowercase)
            unreported += 1
            if unreported == _TICK and self.progress is not None:
                self.progress.update(unreported)
                unreported = 0
        if self.progress is not None:
            self.progress.update(unreported)


def sentence_source(corpus: Sequence[str], options: CorpusOptions) -> Callable[[], Iterator[str]]:
    """A function restarting the sentence stream; a corpus with stdin is read once into memory."""
    if "-" not in corpus:
        return lambda: iter_sentences(corpus, options)
    kept = list(iter_sentences(corpus, options))
    logger.info("stdin can be read only once: keeping the corpus's %d sentences in memory", len(kept))
    return lambda: iter(kept)
