"""GloVe's settings (the paper's defaults where it gives them; recorded in a model's config.json)."""

from __future__ import annotations

from dataclasses import dataclass

from staticsem.distillation.corpus.exclude import EXCLUDE_HELP, check_exclude_files
from staticsem.distillation.corpus.reading import EMBEDDED
from staticsem.distillation.method import setting
from staticsem.errors import InputError

# what to read: not part of the training step's key
READING = ("corpus", "max_words", "max_sentences", "exclude")


@dataclass(frozen=True)
class GloveSettings:
    """Everything that decides a GloVe model."""

    dim: int = setting(256, "Dimensions of the model.")
    window: int = setting(10, "Context words on each side.")
    min_count: int = setting(5, "Minimum corpus count of a vocabulary word.")
    vocab_size: int | None = setting(50_000, "Words to keep (the most frequent).")
    epochs: int = setting(15, "Passes over the co-occurrences.")
    x_max: float = setting(100.0, "Count at which the weighting function reaches 1.")
    alpha: float = setting(0.75, "Exponent of the weighting function.")
    lr: float = setting(0.05, "AdaGrad's learning rate.")
    threads: int | None = setting(
        None, "Training threads (Hogwild, as the reference) [all cores]; 1 is deterministic."
    )
    seed: int = setting(0, "Random seed.")
    lowercase: bool = setting(True, "Lower-case the corpus.")
    max_pairs: int = setting(
        50_000_000, "Non-zeros held in memory while counting before a part goes to disk."
    )
    corpus: tuple[str, ...] = setting(
        (EMBEDDED,), "Text file (.txt, .gz, .jsonl; - for stdin; repeatable) or 'embedded'."
    )
    max_words: int = setting(64, "Skip longer sentences.")
    max_sentences: int | None = setting(None, "Read at most this many corpus sentences.")
    exclude: tuple[str, ...] = setting((), EXCLUDE_HELP)

    def validate(self) -> None:
        """Raise ``InputError`` for settings that cannot work."""
        check_exclude_files(self.exclude)
        positive = ("dim", "window", "min_count", "epochs", "max_pairs", "x_max", "lr")
        bad = next((k for k in positive if getattr(self, k) <= 0), None)
        if bad is not None:
            raise InputError(f"{bad} must be positive, got {getattr(self, bad)}")
        if self.threads is not None and self.threads < 1:
            raise InputError(f"threads must be positive, got {self.threads}")
        if self.vocab_size is not None and self.vocab_size < 1:
            raise InputError(f"vocab_size must be positive, got {self.vocab_size}")
        if not 0 < self.alpha <= 1:
            raise InputError(f"alpha must be in (0, 1], got {self.alpha}")
