"""The SWE pipeline's settings (recorded in a model's config.json) and their checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from staticsem.distillation.corpus import EMBEDDED, check_sources
from staticsem.distillation.crosslingual import language_sources
from staticsem.distillation.kd import KDSettings
from staticsem.distillation.onnx_teacher import DEFAULT_BACKEND, check_backend
from staticsem.distillation.steps import check_splitter
from staticsem.errors import InputError

STAGES = ("extract", "pca", "kd")
OBJECTIVES = ("kd", "contrastive", "both")


@dataclass(frozen=True)
class SWESettings:
    """Everything that decides an SWE model (recorded in its config.json)."""

    corpus: tuple[str, ...]
    teacher: str | None = None
    vocab_size: int = 50_000
    min_count: int = 3
    vocabulary: str | None = None
    sentences_per_word: int = 10
    select_threshold: float = 1.0
    min_words: int = 3
    max_words: int = 64
    max_corpus_sentences: int | None = None
    # sentences per teacher pass: 32 ran 5-15 % faster than 64 with onnx-int8 in paired 3,000-sentence
    # rounds (less padding, smaller activations to quantise), ~1 % on the whole full-recipe extraction
    batch_size: int = 32
    layer: int | None = None  # teacher layer for stage 1 (None: the last; ASE picks any)
    pca_sentences: int = 100_000
    remove_top: int | None = None
    dim: int = 256
    kd: KDSettings = field(default_factory=KDSettings)
    objective: str = "kd"  # stage 3: kd, contrastive (needs parallel) or both
    parallel: tuple[str, ...] = ()  # sentence-pair files (left<TAB>right) for the contrastive objective
    # text read for the distillation targets only: its sentences' teacher embeddings join the chosen
    # sentences' in stage 3a (no word states; e.g. unlabelled text of the domain the model will serve)
    kd_corpus: tuple[str, ...] = ()
    # words of the KD-only text seen this many times or more and missing from the vocabulary get stage-1
    # vectors from its teacher passes (projected by the PCA step's fit) and join the table KD trains [0: off]
    kd_corpus_words: int = 0
    languages: tuple[str, ...] = ()  # split an untagged corpus into these languages (py3langid)
    language: str | None = None  # set on a per-language run of an untagged corpus
    prompt: str | None = None  # teacher prompt name or text put before every sentence [its default]
    splitter: str = "words"  # word splitting: words, or subword (unspaced scripts: the teacher's pieces)
    teacher_backend: str = DEFAULT_BACKEND  # torch, onnx or onnx-int8 (what runs the teacher's transformer)
    seed: int = 0
    stages: tuple[str, ...] = STAGES

    def validate(self) -> None:
        """Raise ``InputError`` for settings that cannot work."""
        bad = [s for s in self.stages if s not in STAGES]
        if bad or not self.stages or self.stages != STAGES[: len(self.stages)]:
            raise InputError(f"--stages must be a prefix of {','.join(STAGES)}, got {','.join(self.stages)}")
        for name in ("vocab_size", "min_count", "sentences_per_word", "batch_size", "pca_sentences", "dim"):
            if getattr(self, name) < 1:
                raise InputError(f"{name.replace('_', '-')} must be positive, got {getattr(self, name)}")
        if not 1 <= self.min_words <= self.max_words:
            raise InputError(f"need 1 <= min-words <= max-words, got {self.min_words} and {self.max_words}")
        if self.objective not in OBJECTIVES:
            raise InputError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if (self.objective == "kd") != (not self.parallel):
            raise InputError(
                "--parallel PAIRS.tsv goes with --objective contrastive or both"
                if self.parallel
                else f"the {self.objective} objective needs --parallel PAIRS.tsv (sentence pairs)"
            )
        for path in self.parallel:
            if not Path(path).is_file():
                raise InputError(f"{path}: parallel pairs file is missing")
        if not 0.0 <= self.kd.group_share <= 1.0 or self.kd.group_size < 2:
            raise InputError(
                f"--kd-groups must be within 0..1 and groups hold 2 or more sentences, got "
                f"{self.kd.group_share} and {self.kd.group_size}"
            )
        if not self.kd.tau > 0.0:
            raise InputError(f"--kd-tau must be positive, got {self.kd.tau}")
        if not 0.0 <= self.kd.average < 1.0:
            raise InputError(f"--kd-average must be within 0..1 (1 excluded), got {self.kd.average}")
        if self.kd_corpus_words < 0 or (self.kd_corpus_words and not self.kd_corpus):
            raise InputError(
                f"--kd-corpus-words takes a count >= 0 and needs --kd-corpus, got {self.kd_corpus_words}"
            )
        if self.kd_corpus:
            if self.objective == "contrastive" or "kd" not in self.stages:
                raise InputError("--kd-corpus feeds the distillation step: it needs --objective kd or both")
            if "-" in self.kd_corpus or EMBEDDED in self.kd_corpus:
                raise InputError("--kd-corpus takes text files (not '-' or 'embedded')")
            check_sources(self.kd_corpus)
        check_splitter(self.splitter)
        check_backend(self.teacher_backend)
        check_sources(self.corpus)
        language_sources(self)
