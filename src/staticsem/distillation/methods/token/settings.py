"""The token method's settings (recorded in a model's config.json)."""

from __future__ import annotations

from dataclasses import dataclass

from staticsem.distillation.method import setting
from staticsem.distillation.teachers.backends import AUTO, BACKEND_HELP, PRECISION_HELP, check_teacher
from staticsem.errors import InputError


@dataclass(frozen=True)
class TokenSettings:
    """Everything that decides a token model."""

    teacher: str | None = setting(
        None, "Sentence Transformer folder or hub name [default: packaged all-MiniLM-L6-v2]."
    )
    vocabulary: str | None = setting(None, "Word list (most frequent first) instead of the teacher's tokens.")
    vocab_size: int | None = setting(None, "Words to keep [all].")
    dim: int = setting(256, "Dimensions of the model (PCA; at most the teacher's).")
    sif: float | None = setting(1e-4, "SIF coefficient for Zipf weights (0 = off).")
    batch_size: int = setting(256, "Words per teacher pass.")
    seed: int = setting(0, "Random seed of the PCA.")
    teacher_backend: str = setting(AUTO, BACKEND_HELP)
    teacher_precision: str = setting(AUTO, PRECISION_HELP)

    def validate(self) -> None:
        """Raise ``InputError`` for settings that cannot work."""
        for name in ("dim", "batch_size"):
            if getattr(self, name) < 1:
                raise InputError(f"{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if self.vocab_size is not None and self.vocab_size < 1:
            raise InputError(f"vocab-size must be positive, got {self.vocab_size}")
        check_teacher(self.teacher_backend, self.teacher_precision)
