"""X2Static's settings (recorded in a model's config.json) and their checks."""

from __future__ import annotations

from dataclasses import dataclass

from staticsem.distillation.corpus.exclude import EXCLUDE_HELP, check_exclude_files
from staticsem.distillation.corpus.reading import EMBEDDED, check_sources
from staticsem.distillation.corpus.sampling import check_splitter
from staticsem.distillation.method import setting
from staticsem.distillation.teachers.backends import AUTO, BACKEND_HELP, PRECISION_HELP, check_teacher
from staticsem.errors import InputError

CONTEXTS = ("sentence", "paragraph")


@dataclass(frozen=True)
class X2StaticSettings:
    """Everything that decides an X2Static model (recorded in its config.json)."""

    corpus: tuple[str, ...] = setting(
        (EMBEDDED,), "Text file (.txt, .gz, .jsonl; - for stdin; repeatable) or 'embedded'."
    )
    teacher: str | None = setting(
        None, "Sentence Transformer folder or hub name [default: packaged all-MiniLM-L6-v2]."
    )
    context: str = setting("sentence", "sentence or paragraph (consecutive sentences) context.")
    paragraph_words: int = setting(150, "Words of a paragraph context.")
    vocab_size: int = setting(50_000, "Words to keep.")
    min_count: int = setting(10, "Minimum corpus count of a vocabulary word.")
    vocabulary: str | None = setting(
        None, "Word list (most frequent first) instead of the corpus's top words."
    )
    negatives: int = setting(10, "Negative words per target.")
    subsample: float = setting(5e-6, "Sub-sampling threshold t of frequent targets.")
    lr: float = setting(1e-3, "Adam learning rate (the paper's).")
    batch_size: int = setting(128, "Sentences per training step.")
    epochs: int = setting(1, "Passes over the corpus.")
    teacher_batch: int = setting(64, "Texts per teacher pass.")
    chunk_sentences: int = setting(4096, "Sentences per saved chunk of contexts.")
    min_words: int = setting(3, "Skip shorter sentences.")
    max_words: int = setting(64, "Skip longer sentences (the teacher reads them whole).")
    max_corpus_sentences: int | None = setting(
        None, "Read at most this many corpus sentences.", option="max-sentences"
    )
    exclude: tuple[str, ...] = setting((), EXCLUDE_HELP)
    seed: int = setting(0, "Random seed (same seed and inputs, same model).")
    prompt: str | None = setting(
        None, "Teacher prompt name (e.g. query) or text put before each text [the teacher's default]."
    )
    splitter: str = setting(
        "words", "Word splitting: words, or subword (unspaced scripts: the teacher's pieces)."
    )
    teacher_backend: str = setting(AUTO, BACKEND_HELP)
    teacher_precision: str = setting(AUTO, PRECISION_HELP)

    def validate(self) -> None:
        """Raise ``InputError`` for settings that cannot work."""
        if self.context not in CONTEXTS:
            raise InputError(f"context must be one of {', '.join(CONTEXTS)}, got {self.context!r}")
        positive = ("paragraph_words", "vocab_size", "min_count", "negatives", "batch_size", "epochs")
        for name in (*positive, "teacher_batch", "chunk_sentences"):
            if getattr(self, name) < 1:
                raise InputError(f"{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if not (self.subsample > 0 and self.lr > 0):
            raise InputError("subsample and lr must be positive")
        if not 1 <= self.min_words <= self.max_words:
            raise InputError(f"need 1 <= min-words <= max-words, got {self.min_words} and {self.max_words}")
        check_splitter(self.splitter)
        check_teacher(self.teacher_backend, self.teacher_precision)
        check_sources(self.corpus)
        check_exclude_files(self.exclude)
