"""The keys of an SWE build's steps: each a hash of every setting that step depends on, so a changed
setting reruns its step and those after it and nothing before; a setting added later counts only when
used, so the keys of builds made without it stay as they were."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from staticsem.distillation.checkpoint import fingerprint
from staticsem.distillation.corpus.reading import fingerprint_sources
from staticsem.distillation.methods.swe.pairs_step import pairs_key
from staticsem.distillation.methods.swe.phrase_step import phrases_key, wants_phrases
from staticsem.distillation.methods.swe.settings import SHORT_DEFAULT_MAX, SHORT_PER_CHOSEN
from staticsem.distillation.stages.kd_settings import PLAIN_TRAINING
from staticsem.distillation.teachers.backends import backend_key


def step_keys(pipeline: Any) -> dict[str, str]:
    """The key of each step of the SWE ``pipeline`` (``Pipeline``)."""
    s = pipeline.settings
    if pipeline.subruns:
        keys = {
            "merge": fingerprint(
                {"extract": [(lang, r.keys["extract"]) for lang, r in pipeline.subruns.items()]}
            )
        }
        extract_key = keys["merge"]
    else:
        vocab = pipeline.vocabulary_key()
        taper = {"rare_after": s.rare_after, "rare_n": s.sentences_per_rare_word} if s.tapers() else {}
        phrases: dict[str, Any] = {}  # keys of runs without phrases stay as they were
        if wants_phrases(s):
            phrases = {"phrases": phrases_key(s, vocab), "per_phrase": s.phrase.per_phrase}
        select = fingerprint(
            {"vocab": vocab, "n": s.sentences_per_word, "threshold": s.select_threshold, **taper} | phrases
        )
        # keys of last-layer, prompt-less torch runs stay as they were
        extra = {k: v for k, v in (("layer", s.layer), ("prompt", s.prompt)) if v is not None}
        extract_key = fingerprint(
            {
                "select": select,
                "batch": s.batch_size,
                **extra,
                **backend_key(s.teacher_backend, s.teacher_precision),
                **pipeline.token_batching(),
            }
        )
        keys = {"vocab": vocab, "select": select, "extract": extract_key}
        if phrases:
            keys["phrases"] = phrases["phrases"]
    mode = {"phrase_mode": s.phrase.mode} if wants_phrases(s) else {}
    pca = fingerprint(
        {"extract": extract_key, "m": s.pca_sentences, "k": s.remove_top, "dim": s.dim, "seed": s.seed} | mode
    )
    objective: dict[str, Any] = (
        {} if s.objective == "kd" else {"objective": s.objective, "pairs": pipeline.pair_prints()}
    )
    if s.kd_corpus or s.draws_short():  # keys of runs without KD-only text stay as they were
        short = s.kd_short or f"{SHORT_PER_CHOSEN}*chosen<={SHORT_DEFAULT_MAX}"
        keys["targets"] = fingerprint(
            {
                "sources": [p["sha256"] for p in fingerprint_sources(s.kd_corpus)],
                **({"short": short, "seed": s.seed} if s.draws_short() else {}),
                **({"hand_over": True} if s.hand_over and pipeline.subruns else {}),
                "select": keys.get("select", extract_key),
                "teacher": s.teacher,
                "words": (s.min_words, s.max_words),
                "batch": s.batch_size,
                "prompt": s.prompt,
                **backend_key(s.teacher_backend, s.teacher_precision),
                **pipeline.token_batching(),
                **({"new_words": s.kd_corpus_words} if s.kd_corpus_words else {}),
            }
        )
        objective["targets"] = keys["targets"]
        if s.edits():  # the copies' neighbours come from the stage-2 table
            edits = {**{k: v for k, v in asdict(s.edit).items() if k != "share"}, "sentences": s.edits()}
            keys["edits"] = fingerprint({"targets": keys["targets"], "pca": pca, **edits})
            objective["edits"] = {"step": keys["edits"], "share": s.edit.share}
    if s.learns_pieces():  # the pieces' teacher states, and how a word weighs its pieces
        states = {
            "teacher": s.teacher,
            "layer": s.layer,
            "prompt": s.prompt,
            **backend_key(s.teacher_backend, s.teacher_precision),
        }
        keys["pieces"] = fingerprint(states)
        objective["pieces"] = {"states": keys["pieces"], "weight": s.piece_train_weight}
    if wants_phrases(s):
        objective["phrase_init"] = s.phrase.init
    # a setting added later counts only when used, so keys of runs made without it stay as they were
    later = {"average": 0.0, "family_share": 0.0, "whole": 0.0, "whole_pairs": "all"}

    def training(kd: Any, objective: dict[str, Any]) -> str:
        settings = {k: v for k, v in asdict(kd).items() if k not in later or v != later[k]}
        return fingerprint({"pca": pca, "kd": settings, **objective})

    kd = training(s.kd, objective)
    keys.update({"pca": pca, "kd": kd})
    if s.search_rows:  # the key a build without edit families gives its distillation
        plain = {k: v for k, v in objective.items() if k != "edits"}
        keys["search"] = training(replace(s.kd, **PLAIN_TRAINING), plain)
    if pipeline.aligns():
        keys["align"] = fingerprint(s.align.key(keys[s.stages[-1]], s.seed, s.kd.lr, s.dim))
    if s.pairs:
        keys["pairs"] = pairs_key(s, keys["align"] if pipeline.aligns() else kd)
    return keys
