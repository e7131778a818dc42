"""SWE's first two steps on the chosen text: choosing the sentences stage 1 reads (``select``) and reading
them through the teacher (``extract``, stage 1), as functions of the pipeline that runs them."""

from __future__ import annotations

from typing import Any

import numpy as np

from staticsem.distillation.corpus.sampling import select_sentences, select_stored
from staticsem.distillation.methods.swe.phrase_step import unit_targets, units
from staticsem.distillation.stages.extract import extract
from staticsem.errors import InputError
from staticsem.io.atomic import save_tensors
from staticsem.model import StaticModel
from staticsem.phrases import entry_table, is_phrase


def select_step(pipeline: Any) -> dict[str, Any]:
    """Choose the sentences stage 1 reads: on the corpus the vocabulary step stored (its word ids), else
    (with Ray, or a work folder from before it stored one) on the corpus read again."""
    vocab, s = pipeline.records["vocab"], pipeline.settings
    entries, tally = units(pipeline)
    counts = dict(zip(entries, tally, strict=True))
    targets = unit_targets(pipeline)
    stored = pipeline.stored_corpus(vocab["lowercase"])
    if stored is not None:
        table = entry_table(entries)
        chosen = select_stored(stored, entries, counts, targets, s.select_threshold, pipeline.progress, table)
    else:
        chosen = select_sentences(
            pipeline.sentences(),
            vocab["words"],
            counts,
            targets,
            vocab["lowercase"],
            s.select_threshold,
            pipeline.progress,
            pipeline.splitter.words,
        )
    return {"sentences": chosen.sentences, "stats": chosen.stats}


def extract_step(pipeline: Any) -> dict[str, Any]:
    """Stage 1: the chosen sentences through the teacher, each vocabulary word's states averaged (resumable
    from its partial file); the words seen become ``stage1``, the sentences' embeddings
    ``stage1.safetensors``."""
    vocab, chosen = pipeline.records["vocab"], pipeline.records["select"]
    entries = units(pipeline)[0]
    pipeline.teacher.check_layer(pipeline.settings.layer)
    partial = pipeline.work.folder / f"stage1-{pipeline.keys['extract']}.partial.safetensors"
    result = (pipeline.scale.extract if pipeline.scale else extract)(
        pipeline.teacher,
        chosen["sentences"],
        entries,
        lowercase=vocab["lowercase"],
        checkpoint=partial,
        save_every=pipeline.save_every,
        show_progress=pipeline.progress,
        layer=pipeline.settings.layer,
        splitter=pipeline.splitter,
        **pipeline.extraction(),
    )
    seen = np.flatnonzero(result.counts > 0)
    if len(seen) == 0:
        raise InputError("no vocabulary word was found in the chosen sentences")
    words = [entries[i] for i in seen]
    stage1 = StaticModel(
        words,
        result.vectors()[seen],
        tokenizer=pipeline.teacher.subword_tokenizer,
        metadata={"method": pipeline.method, "stage": "extract"},
        splitter=pipeline.splitter.name,
        phrases=pipeline.settings.phrase.mode,
    )
    stage1.save(pipeline.work.folder / "stage1", dtype="float32")
    per_sentence = {"embeddings": result.embeddings}
    if result.token_means is not None:
        per_sentence["token_means"] = result.token_means
    save_tensors(pipeline.work.folder / "stage1.safetensors", per_sentence)
    partial.unlink(missing_ok=True)
    return {
        "teacher_passes": result.passes,
        "words_seen": len(words),
        **({"phrases_seen": sum(map(is_phrase, words))} if "phrases" in pipeline.records else {}),
        "teacher_dim": int(result.sums.shape[1]),
        "lowercase": vocab["lowercase"],
    }
