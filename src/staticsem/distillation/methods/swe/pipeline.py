"""The SWE pipeline (METHOD.md §1): vocabulary → sentence choice → extraction → sentence PCA → training.

Training is knowledge distillation (stage 3a), contrastive learning on parallel pairs (stage 3b) or
both. With corpora in several languages (``en=a.txt de=b.txt``, or one corpus split by language
identification) the first three steps run per language and a merge step joins their vocabularies.

Every step writes its result to a work folder beside the output, tagged with a key made of the
settings it depends on. A rerun reuses each step whose key still matches (so changing ``--dim``
keeps the expensive extraction) and resumes an interrupted extraction from its last saved batch.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from staticsem.distillation.corpus.languages import needs_subword
from staticsem.distillation.corpus.parallel import read_pairs
from staticsem.distillation.corpus.reading import fingerprint_sources
from staticsem.distillation.corpus.sampling import missing_words
from staticsem.distillation.method import Frame
from staticsem.distillation.methods.swe.alignment import align_step
from staticsem.distillation.methods.swe.edit_step import edit_step, with_edits
from staticsem.distillation.methods.swe.keys import step_keys
from staticsem.distillation.methods.swe.languages import run_languages, vocabulary_shares
from staticsem.distillation.methods.swe.pairs_step import pairs_step
from staticsem.distillation.methods.swe.phrase_step import (
    phrase_shares,
    phrases_step,
    starting_rows,
    units,
)
from staticsem.distillation.methods.swe.rows import (
    piece_states,
    with_pieces,
    with_search_modes,
    with_words,
    write_analysis,
)
from staticsem.distillation.methods.swe.search_step import SEARCH_FOLDER, search_step, with_training
from staticsem.distillation.methods.swe.sentence_steps import extract_step, select_step
from staticsem.distillation.methods.swe.settings import (
    ASESettings,
    SWESettings,
    for_teacher,
    with_splitter,
)
from staticsem.distillation.methods.swe.targets import targets_step
from staticsem.distillation.stages.abtt import ABTT, ABTT_FILE, sentence_pca
from staticsem.distillation.stages.crosslingual import language_sources, merge_runs
from staticsem.distillation.stages.kd import Contrastive, Distillation, KDSettings, Objective, train_table
from staticsem.distillation.stages.pairs import with_search_rows
from staticsem.distillation.steps import StepRun, run_in_frame
from staticsem.distillation.teachers.teacher import teacher_shape
from staticsem.io import load
from staticsem.model import StaticModel

logger = logging.getLogger(__name__)
STAGE_FOLDERS = {"extract": "stage1", "pca": "stage2", "kd": "stage3", "align": "aligned", "pairs": "stage4"}
# teacher passes beside stage 1's
EXTRA_PASSES = (("targets", "teacher_passes"), ("edits", "teacher_passes"), ("pieces", "pieces"))


class Pipeline(StepRun):
    """Runs the SWE steps (or ASE's first ones, with ``method="ase"``) for ``settings`` into ``out``."""

    settings: SWESettings

    def __init__(
        self,
        settings: SWESettings,
        out: Path,
        *,
        method: str = "swe",
        keep_analysis: bool | None = None,
        **options: Any,
    ) -> None:
        if method == "swe":
            teacher = options.get("teacher")
            shape = (
                (teacher.hidden_size, teacher.num_layers)
                if teacher is not None
                else teacher_shape(settings.teacher, options.get("trust_remote_code", False))
            )
            settings = for_teacher(settings, *shape)
        chosen = settings.splitter is not None
        # as given: a build whose edits made no families trains without them (and by default no search rows)
        self.asked_kd, self.asked_search = settings.kd, settings.search_rows
        settings = with_training(with_splitter(settings))
        super().__init__(settings, out, **options)
        self.method = method
        self.keep_analysis = settings.keep_analysis if keep_analysis is None else keep_analysis
        sources = language_sources(settings)
        shares = vocabulary_shares(settings, sources) if sources else {}
        phrases = phrase_shares(settings, shares)
        self.subruns = {  # one stage-1 run per language (cross-lingual models), each in its own folder
            language: Pipeline(
                replace(
                    settings,
                    corpus=files,
                    vocab_size=shares[language],
                    # stage 1 of a spaced language splits at spaces unless a splitter was asked for
                    splitter=settings.splitter if chosen or needs_subword([language]) else "words",
                    language=language if settings.languages else None,
                    stages=("extract",),
                    objective="kd",
                    parallel=(),
                    kd_short=None,
                    kd_corpus=(),
                    kd_corpus_words=0,
                    phrases=phrases.get(language, 0),
                    phrases_from=settings.phrases_from if language in phrases else None,
                    search_rows=None,
                ),
                out,
                method=method,
                **{**options, "work_dir": self.work.folder / language},
            )
            for language, files in sources.items()
        }

    @functools.cached_property
    def keys(self) -> dict[str, str]:
        """The key of each step: a hash of every setting it depends on (``keys.step_keys``)."""
        return step_keys(self)

    def token_batching(self) -> dict[str, int]:
        """What the teacher passes' keys gain on a GPU: its token budget (CPU keys stay as they were)."""
        return {"tokens": self.settings.batch_tokens} if self.on_gpu else {}

    def extraction(self) -> dict[str, Any]:
        """How ``extract`` batches on this run's device: a token budget and batches made ready by every core
        on a GPU; on the CPU, ``batch_size`` sentences made ready in a thread beside the teacher."""
        if not self.on_gpu:
            return {"batch_size": self.settings.batch_size, "workers": 1}
        tokens, workers = self.settings.batch_tokens, max(1, self.workers - 1)
        return {"batch_size": self.settings.batch_size, "batch_tokens": tokens, "workers": workers}

    def aligns(self) -> bool:
        """Whether the languages are aligned after the last stage: an SWE build of several, through PCA,
        without parallel pairs (contrastive training aligns them its own way)."""
        s = self.settings
        return (
            bool(self.subruns)
            and self.method == "swe"
            and s.align.languages
            and s.objective == "kd"
            and ("pca" in s.stages)
        )

    def pair_prints(self) -> list[Any]:
        """The hashes of the parallel files (the contrastive objective's part of the keys)."""
        return [p["sha256"] for p in fingerprint_sources(self.settings.parallel)]

    def run(self, dtype: str = "float16") -> StaticModel:
        """Run (or reuse) every step, save the model to ``out`` and return it."""
        if self.subruns:
            run_languages(self)
        counting = ("vocab", "phrases") if "phrases" in self.keys else ("vocab",)
        first = ("merge",) if self.subruns else (*counting, "select", "extract")
        later = self.settings.stages[1:]
        for step in ("pieces", "targets", "edits"):  # what the training step uses, just before it
            if step in self.keys:
                later = (*later[:-1], step, later[-1])
        last = tuple(step for step in ("align", "pairs") if step in self.keys)
        self.run_steps((*first, *later, *last), self.keys)
        if "search" in self.keys and (self.asked_search or self.records.get("edits", {}).get("edited")):
            self.run_steps(("search",), self.keys)  # by default only where the KD step had families
        final = last[-1] if last else self.settings.stages[-1]
        model = self._load(STAGE_FOLDERS[final])
        if model.pieces is not None:  # trained at --piece-train-weight, encodes at --piece-weight
            model = with_search_modes(model, self.settings.pieces_weight(), self.settings.search_piece_weight)
        if "search" in self.records:
            model = with_search_rows(model, self._load(SEARCH_FOLDER), int8=True)
        model.metadata = self._metadata()
        model.save(self.out, dtype=dtype)
        self._write_analysis()
        return model

    # ------------------------------------------------------------------ steps
    def _load(self, stage: str) -> StaticModel:
        """A stage's table from the work folder, its phrases counting as ``--phrase-mode`` says."""
        model = load(self.work.folder / stage)
        return model.replace(phrases=self.settings.phrase.mode) if model.phrases else model

    def _phrases(self) -> dict[str, Any]:
        return phrases_step(self)

    @property
    def chosen(self) -> dict[str, Any]:
        """The record holding the chosen sentences (``select``, or ``merge`` for several languages)."""
        return self.records["merge" if self.subruns else "select"]

    def _select(self) -> dict[str, Any]:
        return select_step(self)

    def _extract(self) -> dict[str, Any]:
        return extract_step(self)

    def _targets(self) -> dict[str, Any]:
        return targets_step(self)

    def _edits(self) -> dict[str, Any]:
        return edit_step(self)

    def _missing_words(self, sentences: list[str]) -> list[str]:
        """Words of ``sentences`` seen ``kd_corpus_words`` times or more that stage 1 lacks."""
        known = set(load(self.work.folder / "stage1").vocab)
        least, lowercase = self.settings.kd_corpus_words, self.teacher.lowercases
        return missing_words(sentences, known, least, lowercase, self.splitter.words)

    def _with_kd_words(self, stage2: StaticModel) -> StaticModel:
        """Stage 2 with the KD-only text's new words appended (``with_words``)."""
        words = self.records.get("targets", {}).get("words") or []
        if not words:
            return stage2
        vectors = load_file(str(self.work.folder / "targets.safetensors"))["word_vectors"]
        return with_words(stage2, words, vectors, ABTT.load(self.work.folder / ABTT_FILE))

    def _pieces(self) -> dict[str, Any]:
        """Each subword piece alone through the teacher (``rows.piece_states``; resumable)."""
        folder, key = self.work.folder, self.keys["pieces"]
        return {"pieces": piece_states(self.teacher, folder, key, self.settings.layer, self.progress)}

    def _with_pieces(self, stage2: StaticModel) -> StaticModel:
        """``stage2`` with the pieces' starting rows, when the model learns them."""
        if not self.settings.learns_pieces():
            return stage2
        return with_pieces(stage2, self.work.folder, self.settings.piece_train_weight)

    def _pca(self) -> dict[str, Any]:
        s, sentences = self.settings, self.chosen["sentences"]
        stage1 = self._load("stage1")
        stage2, abtt = sentence_pca(stage1, sentences, s.pca_sentences, s.remove_top, s.dim, s.seed)
        stage2.save(self.work.folder / "stage2", dtype="float32")
        abtt.save(self.work.folder / ABTT_FILE)
        top = len(abtt.removed)
        return {
            "remove_top": top,
            "dim": len(abtt.kept),
            "pca_sentences": min(s.pca_sentences, len(sentences)),
            "removed_variance": float(abtt.explained[:top].sum()),
        }

    def _merge(self) -> dict[str, Any]:
        """Join the languages' stage-1 tables (identical strings averaged) and their chosen sentences."""
        runs = {language: (run.work.folder, run.records) for language, run in self.subruns.items()}
        return merge_runs(runs, self.work.folder, self.method, self.splitter.name)

    def kd_start(self) -> StaticModel:
        """The table distillation starts from: stage 2 with the KD-only words and the pieces' rows."""
        return self._with_pieces(self._with_kd_words(starting_rows(self._load("stage2"), self.settings)))

    def kd_targets(self) -> tuple[list[str], np.ndarray]:
        """The distillation's sentences and their teacher embeddings: stage 1's chosen, then the targets
        step's (KD-only text, short sentences)."""
        targets = load_file(str(self.work.folder / "stage1.safetensors"))["embeddings"]
        sentences = self.chosen["sentences"]
        if "targets" in self.keys:
            more = load_file(str(self.work.folder / "targets.safetensors"))["embeddings"]
            targets = np.concatenate([targets, more])
            sentences = [*sentences, *self.records["targets"]["sentences"]]
        return sentences, targets

    def _kd(self) -> dict[str, Any]:
        stage2, s, kd = self.kd_start(), self.settings, self.settings.kd
        objectives: list[Objective] = []
        if s.objective in ("kd", "both"):
            sentences, targets = self.kd_targets()
            families = None
            if "edits" in self.keys:
                sentences, targets, families = with_edits(self, sentences, targets)
                kd = kd if families else self.asked_kd.resolved(False)  # none made: train without
            objectives.append(
                Distillation(
                    stage2,
                    sentences,
                    targets,
                    kd.tau,
                    kd.center_targets,
                    families,
                    kd.whole_weight,
                    kd.pairs_ranked,
                )
            )
        if s.objective in ("contrastive", "both"):
            objectives.append(Contrastive(stage2, *read_pairs(s.parallel, s.exclude), kd.tau))
        share = s.edit.share if "edits" in self.keys else 0.0
        stats = self.train_into(
            "kd", "stage3", stage2, objectives, replace(kd, seed=s.seed, family_share=share)
        )
        return {"objective": s.objective, **stats}

    def train_into(
        self, step: str, into: str, start: StaticModel, objectives: list[Objective], settings: KDSettings
    ) -> dict[str, Any]:
        """Train ``start`` on ``objectives`` into the work folder's ``into`` (float32); the stats. A stopped
        run resumes from ``{step}.partial.safetensors`` (its last evaluation); another key starts over."""
        folder, key = self.work.folder, self.keys[step]
        checkpoint = folder / f"{step}.partial.safetensors"
        trained, stats = train_table(
            start,
            objectives,
            settings,
            self.progress,
            checkpoint=checkpoint,
            key=key,
            save_every=self.save_every,
            device=self.train_device,
        )
        trained.save(folder / into, dtype="float32")
        return stats

    def _search(self) -> dict[str, Any]:
        return search_step(self)

    def _align(self) -> dict[str, Any]:
        source = self.work.folder / STAGE_FOLDERS[self.settings.stages[-1]]
        return align_step(self, source, self.work.folder / STAGE_FOLDERS["align"])

    def _pairs(self) -> dict[str, Any]:
        source = STAGE_FOLDERS["align" if self.aligns() else "kd"]
        return pairs_step(
            self.work.folder, source, self.settings, self.progress, self.save_every, self.train_device
        )

    # ------------------------------------------------------------------ outputs
    def _metadata(self) -> dict[str, Any]:
        select = self.chosen["stats"]
        extra = sum(self.records.get(step, {}).get(key, 0) for step, key in EXTRA_PASSES)
        passes = select["sentences_chosen"] + extra
        languages = {"languages": list(self.subruns)} if self.subruns else {}
        return self.metadata(passes, reference_passes=select["reference_passes"], **languages)

    def _write_analysis(self) -> None:
        """What ``staticsem analyze`` reads (``rows.write_analysis``), once the PCA step has run."""
        if (self.work.folder / ABTT_FILE).is_file() and "pca" in self.settings.stages:
            vocab = self.records["merge"] if self.subruns else None
            entries, tally = (vocab["words"], vocab["counts"]) if vocab is not None else units(self)
            counts = dict(zip(entries, tally, strict=True))
            write_analysis(self.work.folder, counts, self.out if self.keep_analysis else None)


def run_swe(settings: SWESettings, frame: Frame) -> StaticModel:
    """The swe method's run: every step above in the shared frame."""
    return run_in_frame(Pipeline, settings, frame, method="swe")


def run_ase(settings: ASESettings, frame: Frame) -> StaticModel:
    """The ase method's run: SWE's stage 1 alone (the model records SWE's settings, as it always has)."""
    stage1 = SWESettings(**{f.name: getattr(settings, f.name) for f in fields(settings)}, stages=("extract",))
    return run_in_frame(Pipeline, stage1, frame, method="ase")
