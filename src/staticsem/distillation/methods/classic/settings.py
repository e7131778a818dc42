"""The settings of the gensim baselines, word2vec and fastText (recorded in a model's config.json)."""

from __future__ import annotations

from dataclasses import dataclass

from staticsem.distillation.corpus.exclude import EXCLUDE_HELP, check_exclude_files
from staticsem.distillation.corpus.reading import EMBEDDED, check_sources
from staticsem.distillation.method import setting


@dataclass(frozen=True)
class Word2VecSettings:
    """word2vec (CBOW or skip-gram) trained by gensim on the corpus; no teacher."""

    corpus: tuple[str, ...] = setting(
        (EMBEDDED,), "Text file (.txt, .gz, .jsonl; - for stdin; repeatable) or 'embedded'."
    )
    vocab_size: int = setting(
        50_000, "Words to keep (gensim raises min_count until the vocabulary fits, so it can end smaller)."
    )
    min_count: int = setting(5, "Minimum corpus count of a vocabulary word.")
    dim: int = setting(256, "Dimensions of the model.")
    window: int = setting(5, "Context words on each side.")
    negative: int = setting(5, "Negative samples per word.")
    sample: float = setting(1e-3, "Down-sampling threshold of frequent words.")
    epochs: int = setting(5, "Passes over the corpus.")
    sg: bool = setting(False, "Skip-gram instead of CBOW.", option="skip-gram")
    workers: int = setting(2, "gensim threads (only 1 gives the same vectors for the same seed).")
    seed: int = setting(0, "Random seed.")
    lowercase: bool = setting(True, "Lower-case the corpus.")
    max_words: int = setting(64, "Skip longer sentences.")
    max_sentences: int | None = setting(None, "Read at most this many corpus sentences.")
    exclude: tuple[str, ...] = setting((), EXCLUDE_HELP)

    def validate(self) -> None:
        """Raise ``InputError`` for an unusable corpus (``distill_classic`` checks the numbers)."""
        check_sources(self.corpus)
        check_exclude_files(self.exclude)


@dataclass(frozen=True)
class FastTextSettings(Word2VecSettings):
    """fastText: word2vec with character n-grams, which give unseen words a vector."""

    minn: int = setting(3, "Shortest character n-gram.")
    maxn: int = setting(6, "Longest character n-gram.")
    buckets: int = setting(200_000, "Rows of the n-gram bucket table.")
