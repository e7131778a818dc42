"""The frame the corpus methods (SWE, ASE, X2Static) share: checked settings, a lazily loaded teacher,
the streamed corpus, and named steps that are reused from the work folder while their key matches."""

from __future__ import annotations

import functools
import logging
import resource
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from staticsem.distillation.checkpoint import Work, fingerprint, timed, work_folder
from staticsem.distillation.corpus.phrase_choice import wants_phrases
from staticsem.distillation.corpus.prefetch import background_sentences
from staticsem.distillation.corpus.reading import CorpusOptions, fingerprint_sources
from staticsem.distillation.corpus.scan import Words, stream_sentences
from staticsem.distillation.corpus.stored import StoredCorpus
from staticsem.distillation.corpus.vocabulary import vocabulary_key, vocabulary_record, vocabulary_step
from staticsem.distillation.method import record
from staticsem.distillation.teachers.device import resolve_device, resolve_runtime
from staticsem.distillation.teachers.teacher import DEFAULT_TEACHER, Teacher
from staticsem.distillation.workers import check_workers
from staticsem.errors import InputError
from staticsem.io.build_facts import step_rows
from staticsem.text import BUILTIN_SPLITTERS, WordSplitter, make_splitter
from staticsem.version import BUILD_PACKAGES, environment

if TYPE_CHECKING:
    from staticsem.distillation.method import Frame
    from staticsem.model import StaticModel

logger = logging.getLogger(__name__)
TEACHER_FACTS = ("prompt", "backend", "precision")  # the teacher's record: what it read and ran on


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
    teacher_precision: str

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
        workers: int | None = None,
        device: str = "auto",
    ) -> None:
        settings.validate()
        self.workers = check_workers(workers)  # processes for the corpus's passes (every core by default)
        # where the teacher runs (auto: the GPU where torch sees one), its backend and precision; the settings
        # (so the keys and config.json) hold what they resolve to
        self.runtime = (scale.runtime if scale is not None else resolve_runtime)(
            device, settings.teacher_backend, settings.teacher_precision
        )
        settings = replace(
            settings, teacher_backend=self.runtime.backend, teacher_precision=self.runtime.precision
        )
        # the teacher record's key: the teacher as asked for (it may fall back from this runtime)
        asked = {"teacher": settings.teacher, "prompt": getattr(settings, "prompt", None)}
        self.teacher_key = fingerprint({**asked, **asdict(self.runtime)})
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
                    settings.teacher_precision,
                    self.runtime.fallback,
                )
            )
        self.records: dict[str, dict[str, Any]] = {}  # finished steps of this run, in order
        self.reused: list[str] = []  # the steps this run took from the work folder
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
        """The teacher, loaded on first use (steps that are reused do not need it); one that ONNX cannot
        export runs on torch where the backend was left to auto. Its record says what it read and ran on."""
        if self._teacher is None:
            self._teacher = Teacher(
                self.settings.teacher,
                trust_remote_code=self.trust_remote_code,
                prompt=getattr(self.settings, "prompt", None),
                backend=self.settings.teacher_backend,
                cache=self.work.folder / "onnx",
                device=self.local_device,
                precision=self.settings.teacher_precision,
                fallback=self.runtime.fallback,
            )
            teacher = self._teacher
            self.work.finish("teacher", self.teacher_key, {k: getattr(teacher, k) for k in TEACHER_FACTS})
            logger.info("teacher on %s", self.runtime.ran(teacher.backend, teacher.precision).describe())
        return self._teacher

    def teacher_facts(self) -> dict[str, Any]:
        """The prompt the teacher read and what it ran on, as recorded where it was loaded (this run, the
        run whose steps this one reuses, or a language's run; the teacher is loaded only where none did).
        The runtime and settings (so config.json) follow: torch, where ONNX could not export the teacher."""
        for run in (self, *getattr(self, "subruns", {}).values()):
            if (facts := run.work.done("teacher", self.teacher_key)) is not None:
                self.runtime = self.runtime.ran(facts["backend"], facts["precision"])
                self.settings = replace(
                    self.settings, teacher_backend=facts["backend"], teacher_precision=facts["precision"]
                )
                return facts
        # a teacher given to the run keeps its record (one that does not say what it reads: the asked prompt)
        return {"prompt": getattr(self.teacher, "prompt", None)}

    @property
    def local_device(self) -> str:
        """Where this process's teacher runs (with Ray, the replicas run theirs: this one serves its
        tokenizer and the steps that stay here, on the CPU)."""
        return "cpu" if self.runtime.device.startswith("ray") else self.runtime.device

    @property
    def train_device(self) -> str:
        """Where the steps that train (KD, the alignment's refinement, the pairs) run: the teacher's device
        (with Ray: this machine's GPU, if it has one)."""
        return self.runtime.device if not self.runtime.device.startswith("ray") else resolve_device("auto")

    @property
    def on_gpu(self) -> bool:
        """Whether the teacher runs on a GPU (its passes then batch by tokens)."""
        return self.runtime.device.startswith("cuda") or self.runtime.device == "ray-gpu"

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
        """The corpus sentences, streamed afresh (on ``workers`` processes; with Ray, read ahead in a child
        process for the cluster); ``excluded`` counts the sentences ``--exclude`` dropped, per source."""
        if self.scale is not None:
            return background_sentences(self.settings.corpus, self.options, excluded=excluded)
        return stream_sentences(self.settings.corpus, self.options, workers=self.workers, excluded=excluded)

    def _words(self, lowercase: bool) -> Words:
        """How the vocabulary splits sentences into words (for the corpus's workers)."""
        name = self.splitter.name
        tokenizer = None if name == "words" else self.teacher.subword_tokenizer.to_str()
        return Words(lowercase, name, tokenizer, links=self.links())

    def links(self) -> bool:
        """Whether the stored corpus keeps each word's link to the next: a build with phrases reads them."""
        return wants_phrases(self.settings)

    def _stored_folder(self, lowercase: bool) -> Path:
        """Where the corpus, read once for the vocabulary, is kept (by what decides its words)."""
        s = self.settings
        key = fingerprint(
            {
                "corpus": [p.get("sha256") or p["source"] for p in self.corpus_prints],
                "options": self.options.key(),
                "splitter": self.splitter.name,
                "lowercase": lowercase,
                "teacher": (s.teacher or "default") if self.splitter.name != "words" else None,
                **({"links": True} if self.links() else {}),  # keys of runs without phrases stay as they were
            }
        )
        return self.work.folder / f"corpus-{key}"

    def stored_corpus(self, lowercase: bool) -> StoredCorpus | None:
        """The corpus as the vocabulary step stored it (None with Ray, or a folder from before it did)."""
        return None if self.scale is not None else StoredCorpus.open(self._stored_folder(lowercase))

    def vocabulary_key(self) -> str:
        """Key of the vocabulary step (corpus content, teacher, sizes, word list)."""
        s = self.settings
        splitter = getattr(s, "splitter", "words")
        return vocabulary_key(
            self.corpus_prints, s.teacher, s.vocab_size, s.min_count, self.options, s.vocabulary, splitter
        )

    def _vocab(self) -> dict[str, Any]:
        """Count the corpus's words: read once on every core and stored for the later steps (or, with Ray,
        a map-reduce on the cluster)."""
        s, excluded, lowercase = self.settings, dict[str, int](), self.teacher.lowercases
        if self.scale is not None:
            found = vocabulary_step(
                self.sentences(excluded),
                lowercase,
                s.vocab_size,
                s.min_count,
                s.vocabulary,
                self.progress,
                self.splitter.words,
                count=self.scale.count_words,
            )
            return {**found, "excluded": excluded} if s.exclude else found
        stored = self.count_corpus()
        found = vocabulary_record(
            stored.counter(), stored.sentences, lowercase, s.vocab_size, s.min_count, s.vocabulary
        )
        return {**found, "excluded": dict(stored.excluded)} if s.exclude else found

    def count_corpus(self) -> StoredCorpus:
        """The corpus read once (on ``workers`` processes) and stored in the work folder (or as stored)."""
        lowercase = self.teacher.lowercases
        folder = self._stored_folder(lowercase)
        stored = StoredCorpus.open(folder)
        if stored is None:
            for old in self.work.folder.glob("corpus-*"):  # another corpus or options: not needed again
                shutil.rmtree(old, ignore_errors=True)
            # a splitter registered in this process only (register_splitter) is unknown to other processes
            workers = self.workers if self.splitter.name in BUILTIN_SPLITTERS else 1
            stored = StoredCorpus.build(
                folder,
                self.settings.corpus,
                self.options,
                self._words(lowercase),
                workers=workers,
                show_progress=self.progress,
            )
        return stored

    def resize(self, vocab_size: int) -> None:
        """Keep ``vocab_size`` words (the keys follow)."""
        self.settings = replace(self.settings, vocab_size=vocab_size)
        self.forget_keys()

    def forget_keys(self) -> None:
        """Drop the cached step keys: the next read computes them from the settings and records as they
        are now (after a change that runs of this build made to them)."""
        self.__dict__.pop("keys", None)

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
                self.reused.append(step)
            self.records[step] = record

    def metadata(self, teacher_passes: int, **extra: Any) -> dict[str, Any]:
        """What the model's config.json records: method, teacher, corpus, settings, steps (and their table:
        time, teacher passes, sentences/s), cost."""
        # lists of the vocabulary, the phrases and the chosen sentences
        long = ("words", "counts", "sentences", "phrases", "scores", "word_counts", "families")
        steps = {
            name: {k: v for k, v in record.items() if k != "key" and not (k in long and isinstance(v, list))}
            for name, record in self.records.items()
        }
        # the text the teacher read: its folder's default prompt where none was asked for, and the empty text
        # a prompt name may stand for; nothing (null) where neither asked for nor read
        read, asked = self.teacher_facts()["prompt"], getattr(self.settings, "prompt", None)
        text = read if read is not None and (read or asked is not None) else asked
        prompt = {"prompt": text} if hasattr(self.settings, "prompt") else {}
        return {
            "method": self.method,
            "teacher": self.settings.teacher or DEFAULT_TEACHER,
            "corpus": self.corpus_prints,
            "settings": record(self.settings, **prompt),
            "steps": steps,
            "step_times": step_rows(self.records, self.reused),
            "teacher_passes": teacher_passes,
            **extra,
            "runtime": {"device": self.runtime.describe(), "workers": self.workers},
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
        workers=frame.workers,
        device=frame.device,
        **extra,
    )
    model: StaticModel = run.run(dtype=frame.dtype)
    if not frame.keep_work:
        shutil.rmtree(run.work.folder, ignore_errors=True)
    return model
