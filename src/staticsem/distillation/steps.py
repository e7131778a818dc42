"""The frame the corpus methods (SWE, ASE, X2Static) share: checked settings, a lazily loaded teacher,
the streamed corpus, and named steps that are reused from the work folder while their key matches."""

from __future__ import annotations

import functools
import logging
import resource
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from staticsem.distillation.checkpoint import Work, timed, work_folder
from staticsem.distillation.corpus.prefetch import background_sentences
from staticsem.distillation.corpus.reading import CorpusOptions, fingerprint_sources
from staticsem.distillation.corpus.sampling import count_words
from staticsem.distillation.corpus.vocabulary import vocabulary_key, vocabulary_step
from staticsem.distillation.method import record
from staticsem.distillation.teachers.teacher import DEFAULT_TEACHER, Teacher
from staticsem.errors import InputError
from staticsem.text import WordSplitter, make_splitter
from staticsem.version import BUILD_PACKAGES, environment

if TYPE_CHECKING:
    from staticsem.distillation.method import Frame
    from staticsem.model import StaticModel

logger = logging.getLogger(__name__)


class CorpusSettings(Protocol):
    """What every corpus method's settings hold (its dataclass adds the rest)."""

    corpus: tuple[str, ...]
    teacher: str | None
    vocab_size: int
    min_count: int
    vocabulary: str | None
    min_words: int
    max_words: int
    max_corpus_sentences: int | None
    exclude: tuple[str, ...]
    teacher_backend: str

    def validate(self) -> None: ...


class StepRun:
    """Runs a method's steps for ``settings`` into ``out``; the work folder sits beside ``out``."""

    method = ""

    def __init__(
        self,
        settings: Any,
        out: Path,
        *,
        trust_remote_code: bool = False,
        show_progress: bool = True,
        teacher: Teacher | None = None,
        save_every: float = 180.0,
        work_dir: Path | None = None,
        scale: Any | None = None,
    ) -> None:
        settings.validate()
        self.settings, self.out, self.progress = settings, out, show_progress
        self.trust_remote_code, self.save_every = trust_remote_code, save_every
        self.work = Work(work_dir or work_folder(out))
        self._teacher = teacher
        self.scale = scale  # a staticsem.scale.distill.RayScale: counting and teacher passes on a cluster
        if scale is not None:
            from staticsem.scale.distill import TeacherSpec

            scale.default_teacher(
                TeacherSpec(
                    settings.teacher,
                    trust_remote_code,
                    getattr(settings, "prompt", None),
                    settings.teacher_backend,
                    str(self.work.folder / "onnx"),
                )
            )
        self.records: dict[str, dict[str, Any]] = {}  # finished steps of this run, in order
        self.corpus_prints = fingerprint_sources(settings.corpus)
        language = getattr(settings, "language", None)  # a per-language run of an untagged corpus
        self.options = CorpusOptions(
            settings.min_words,
            settings.max_words,
            max_sentences=settings.max_corpus_sentences,
            language=language,
            languages=tuple(getattr(settings, "languages", ())) if language else (),
            exclude=tuple(settings.exclude),
        )

    @property
    def teacher(self) -> Teacher:
        """The teacher, loaded on first use (steps that are reused do not need it)."""
        if self._teacher is None:
            self._teacher = Teacher(
                self.settings.teacher,
                trust_remote_code=self.trust_remote_code,
                prompt=getattr(self.settings, "prompt", None),
                backend=self.settings.teacher_backend,
                cache=self.work.folder / "onnx",
            )
        return self._teacher

    @functools.cached_property
    def splitter(self) -> WordSplitter:
        """How texts split into words (``subword`` needs the teacher's tokenizer, so loads the teacher)."""
        name = getattr(self.settings, "splitter", "words")
        if name == "words":
            return WordSplitter()
        try:
            return make_splitter(name, self.teacher.subword_tokenizer)
        except ValueError as exc:
            raise InputError(str(exc)) from None

    def sentences(self, excluded: dict[str, int] | None = None) -> Iterator[str]:
        """The corpus sentences, streamed afresh (read ahead in a child process); ``excluded`` counts the
        sentences ``--exclude`` dropped, per source."""
        return background_sentences(self.settings.corpus, self.options, excluded=excluded)

    def vocabulary_key(self) -> str:
        """Key of the vocabulary step (corpus content, teacher, sizes, word list)."""
        s = self.settings
        splitter = getattr(s, "splitter", "words")
        return vocabulary_key(
            self.corpus_prints, s.teacher, s.vocab_size, s.min_count, self.options, s.vocabulary, splitter
        )

    def _vocab(self) -> dict[str, Any]:
        s, excluded = self.settings, dict[str, int]()
        found = vocabulary_step(
            self.sentences(excluded),
            self.teacher.lowercases,
            s.vocab_size,
            s.min_count,
            s.vocabulary,
            self.progress,
            self.splitter.words,
            count=self.scale.count_words if self.scale else count_words,
        )
        return {**found, "excluded": excluded} if s.exclude else found

    def run(self, dtype: str = "float16") -> StaticModel:
        """Run (or reuse) every step of the method, save the model to ``out`` and return it."""
        raise NotImplementedError

    def run_steps(self, steps: Sequence[str], keys: Mapping[str, str]) -> None:
        """Run each step (method ``_STEP``) or reuse its finished record; records go to ``self.records``."""
        for step in steps:
            record = self.work.done(step, keys[step])
            if record is None:
                logger.info("step %s: running", step)
                record = self.work.finish(step, keys[step], timed(getattr(self, f"_{step}")))
            else:
                logger.info("step %s: reusing the finished result in %s", step, self.work.folder)
            self.records[step] = record

    def metadata(self, teacher_passes: int, **extra: Any) -> dict[str, Any]:
        """What the model's config.json records: method, teacher, corpus, settings, steps, cost."""
        long = ("words", "counts", "sentences")  # lists of the vocabulary and the chosen sentences
        steps = {
            name: {k: v for k, v in record.items() if k != "key" and not (k in long and isinstance(v, list))}
            for name, record in self.records.items()
        }
        return {
            "method": self.method,
            "teacher": self.settings.teacher or DEFAULT_TEACHER,
            "corpus": self.corpus_prints,
            "settings": record(self.settings),
            "steps": steps,
            "teacher_passes": teacher_passes,
            **extra,
            "seconds": round(sum(r.get("seconds", 0.0) for r in self.records.values()), 1),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "environment": environment(BUILD_PACKAGES),  # of the run that wrote the model
        }


def run_in_frame(make: Callable[..., StepRun], settings: Any, frame: Frame, **extra: Any) -> StaticModel:
    """Run the steps of ``make(settings, ...)`` where ``frame`` says; drop the work folder unless kept."""
    run = make(
        settings,
        frame.out,
        trust_remote_code=frame.trust_remote_code,
        show_progress=frame.show_progress,
        work_dir=frame.work_dir,
        scale=frame.scale,
        **extra,
    )
    model: StaticModel = run.run(dtype=frame.dtype)
    if not frame.keep_work:
        shutil.rmtree(run.work.folder, ignore_errors=True)
    return model
