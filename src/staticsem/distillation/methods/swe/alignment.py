"""SWE's last step for a build of several languages: each language mapped onto the teacher's shared space
(``stages.align``: an affine map per language, baked into the rows), then the rows refined so that every
sentence's mean points at its teacher embedding in that space (``kd.Regression``: cosine, lazy Adam, early
stopping on held-out sentences). The maps remove what is linear in a language's offset; the refinement
reaches single words the maps cannot (the 12-language build, STS-B dev of 7 languages: monolingual 72.60 →
75.13, en–X 60.63 → 63.64, English 68.76 → 71.00; 11,240 steps, 168 s)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from staticsem.distillation.stages.align import (
    COMPONENTS,
    LanguageSample,
    align_rows,
    fit_language_maps,
    fit_piece_map,
    language_shares,
    shared_space,
    shared_targets,
)
from staticsem.distillation.stages.kd import KDSettings, Regression, train_table
from staticsem.io import load
from staticsem.model import StaticModel


def align_step(pipeline: Any, source: Path, into: Path) -> dict[str, Any]:
    """Map each language of ``pipeline`` onto the teacher's shared space, fitted on up to
    ``--align-sentences`` of its chosen sentences and their teacher embeddings, then (``--align-steps``)
    refine the rows on every chosen and short sentence of each language; ``source``'s model so aligned is
    saved to ``into``. The step's record: the sentences used per language, the refinement's statistics."""
    s = pipeline.settings
    rng = np.random.default_rng(s.seed)
    short = short_by_language(pipeline.work.folder, pipeline.records.get("targets", {}))
    samples, counts, everything = {}, {}, {}
    for language, run in pipeline.subruns.items():
        sentences = run.records["select"]["sentences"]
        targets = load_file(str(run.work.folder / "stage1.safetensors"))["embeddings"]
        take = np.sort(rng.permutation(len(sentences))[: s.align.sentences])
        samples[language] = LanguageSample([sentences[i] for i in take], targets[take])
        vocab = run.records["vocab"]
        counts[language] = dict(zip(vocab["words"], vocab["counts"], strict=True))
        more = short.get(language, LanguageSample([], targets[:0]))
        everything[language] = LanguageSample(
            [*sentences, *more.sentences], np.vstack([targets, more.targets])
        )
    model = load(source)
    space = shared_space(samples, model.dim)
    components = s.align.directions(s.dim)
    maps = fit_language_maps(model, samples, components, space)
    fitted = s.align.pieces == "fitted"
    piece_map = fit_piece_map(model, samples, space, components) if fitted else None
    aligned = align_rows(model, maps, language_shares(model.vocab, counts), piece_map)
    record: dict[str, Any] = {"sentences": {lang: len(sample.sentences) for lang, sample in samples.items()}}
    record["pieces"], record["components"] = ("fitted" if fitted else "mean"), components
    if s.align.steps:
        settings = replace(s.kd, max_steps=s.align.steps, seed=s.seed, lr=s.align.lr)
        aligned, record["refine"] = refine_rows(  # a stopped refinement resumes from its last evaluation
            aligned,
            everything,
            space,
            settings,
            pipeline.progress,
            components,
            checkpoint=pipeline.work.folder / "align.partial.safetensors",
            key=pipeline.keys["align"],
            save_every=pipeline.save_every,
            device=pipeline.train_device,
        )
    aligned.save(into, dtype="float32")
    return record


def refine_rows(
    model: StaticModel,
    languages: Mapping[str, LanguageSample],
    space: Any,
    settings: KDSettings,
    show_progress: bool = True,
    components: int = COMPONENTS,
    *,
    checkpoint: Path | None = None,
    key: str = "",
    save_every: float = 180.0,
    device: str | None = None,
) -> tuple[StaticModel, dict[str, Any]]:
    """``model``'s rows (and pieces) trained so each sentence of ``languages`` has its mean point at its
    teacher embedding in ``space`` (``stages.align.shared_targets``: per language, ``components`` top
    directions removed, as the maps remove them); the training's stats. ``checkpoint``, ``key`` and
    ``save_every``: ``train_table``'s resumable state."""
    sentences = [sentence for sample in languages.values() for sentence in sample.sentences]
    targets = np.vstack([shared_targets(space, s.targets, components) for s in languages.values()])
    objective = Regression(model, sentences, targets)
    trained, stats = train_table(
        model,
        [objective],
        settings,
        show_progress,
        checkpoint=checkpoint,
        key=key,
        save_every=save_every,
        device=device,
    )
    trained.metadata = model.metadata  # train_table's "kd" record would replace the distillation's own
    used = {lang: len(sample.sentences) for lang, sample in languages.items()}
    return trained, {**stats, "sentences": used}


def short_by_language(folder: Path, record: Mapping[str, Any]) -> dict[str, LanguageSample]:
    """The targets step's short sentences of each language (the record's ``short_languages``: none for a
    record written before it existed) and their teacher embeddings, read from ``folder``."""
    if not record.get("short_languages"):
        return {}
    embeddings = load_file(str(folder / "targets.safetensors"))["embeddings"]
    sentences, start = record["sentences"], len(record["sentences"]) - record["short"]
    short = {}
    for language, count in record["short_languages"].items():
        short[language] = LanguageSample(sentences[start : start + count], embeddings[start : start + count])
        start += count
    return short
