"""SWE's targets step: the teacher's embeddings of the sentences only distillation reads (``--kd-corpus``
and the short sentences), one pass each, resumable like stage 1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from staticsem.distillation.corpus.reading import CorpusOptions
from staticsem.distillation.corpus.scan import stream_sentences
from staticsem.distillation.methods.swe.languages import short_sentences
from staticsem.distillation.stages.extract import extract
from staticsem.errors import InputError
from staticsem.io.atomic import save_tensors


def sentence_passes(pipeline: Any, sentences: list[str], words: list[str], partial: Path) -> Any:
    """One teacher pass per sentence (and the states of ``words``) on the run's device or replicas,
    resumable from ``partial`` (the caller removes it once its result is saved)."""
    return (pipeline.scale.extract if pipeline.scale else extract)(
        pipeline.teacher,
        sentences,
        words,
        lowercase=pipeline.teacher.lowercases,
        checkpoint=partial,
        save_every=pipeline.save_every,
        show_progress=pipeline.progress,
        splitter=pipeline.splitter,
        **pipeline.extraction(),
    )


def targets_step(pipeline: Any) -> dict[str, Any]:
    """The targets step of an SWE ``pipeline``: the teacher's embeddings of the KD-only corpus's sentences
    (those not chosen already) and the short ones; no word states but those of new words."""
    s, chosen, excluded = pipeline.settings, set(pipeline.chosen["sentences"]), dict[str, int]()
    options = CorpusOptions(s.min_words, s.max_words, exclude=s.exclude)
    read = stream_sentences(s.kd_corpus, options, workers=pipeline.workers, excluded=excluded)
    sentences = [t for t in read if t not in chosen]
    short: dict[str, list[str]] = {}
    if count := s.short_count(len(chosen)):
        runs = pipeline.subruns or {"": pipeline}
        hand_on = s.hand_over and bool(pipeline.subruns)
        short = short_sentences(runs, count, chosen | set(sentences), s.seed, hand_on)
        sentences += [sentence for drawn in short.values() for sentence in drawn]
    if not sentences and s.kd_short is None and not s.kd_corpus:  # the default draw found none
        empty = np.zeros((0, pipeline.teacher.sentence_dim), np.float32)
        save_tensors(pipeline.work.folder / "targets.safetensors", {"embeddings": empty})
        return {"sentences": [], "teacher_passes": 0, "words": [], "new_words": 0, "short": 0}
    if not sentences:
        raise InputError(f"--kd-corpus / --kd-short: no new sentence of {s.min_words} to {s.max_words} words")
    new = pipeline._missing_words(sentences) if s.kd_corpus_words else []
    partial = pipeline.work.folder / f"targets-{pipeline.keys['targets']}.partial.safetensors"
    result = sentence_passes(pipeline, sentences, new, partial)
    seen = np.flatnonzero(result.counts > 0)
    tensors = {"embeddings": result.embeddings}
    if len(seen):
        tensors["word_vectors"] = result.vectors()[seen]
    save_tensors(pipeline.work.folder / "targets.safetensors", tensors)
    partial.unlink(missing_ok=True)
    words = [new[i] for i in seen]
    return {
        "sentences": sentences,
        "teacher_passes": result.passes,
        "words": words,
        "new_words": len(words),
        "short": sum(len(drawn) for drawn in short.values()),
        **({"short_languages": {k: len(v) for k, v in short.items()}} if pipeline.subruns else {}),
        **({"excluded": excluded} if s.exclude and s.kd_corpus else {}),
    }
