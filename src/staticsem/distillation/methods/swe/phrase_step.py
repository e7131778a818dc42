"""SWE's phrases step (``--phrases N``, ``--phrases-from FILE``): which multi-word units get rows, chosen on
the corpus the vocabulary step stored (its word ids and links), and what stage 1 then covers: the
vocabulary's words, the listed phrases' words it lacked, and the phrases (``phrase_choice``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.distillation.checkpoint import fingerprint
from staticsem.distillation.corpus.languages import apportion, needs_subword
from staticsem.distillation.corpus.phrase_choice import choose, read_phrase_list, settle, wants_phrases
from staticsem.distillation.stages.crosslingual import corpus_languages
from staticsem.errors import InputError
from staticsem.model import StaticModel
from staticsem.phrases import is_phrase
from staticsem.quantize import dequantize

logger = logging.getLogger(__name__)


def phrases_key(settings: Any, vocab_key: str) -> str:
    """Key of the phrases step: the vocabulary, the count, the choice's settings and the list's content."""
    listed = [] if settings.phrases_from is None else read_phrase_list(Path(settings.phrases_from))
    choice = {k: getattr(settings.phrase, k) for k in ("min_count", "threshold", "max_words")}
    return fingerprint({"vocab": vocab_key, "n": settings.phrases, **choice}, [" ".join(p) for p in listed])


def phrase_shares(settings: Any, shares: dict[str, int]) -> dict[str, int]:
    """``--phrases`` shared by a cross-lingual build's languages written with spaces, as their words are
    (``shares``: each language's vocabulary); the others get none, said once."""
    if not wants_phrases(settings) or not shares:
        return {}
    unspaced = [language for language in shares if needs_subword([language])]
    if unspaced:
        logger.info("no phrases for %s: written without spaces between words", ", ".join(unspaced))
    spaced_shares = {language: n for language, n in shares.items() if language not in unspaced}
    return apportion(settings.phrases, spaced_shares) if spaced_shares else {}


def spaced(run: Any) -> bool:
    """Whether this run's language (a cross-lingual build's, else its corpus's tag) is written with spaces
    (phrases are words between spaces)."""
    language = getattr(run.settings, "language", None)
    languages = [language] if language else corpus_languages(run.settings)
    return run.splitter.name == "words" and not (languages and needs_subword(languages))


def phrases_step(run: Any) -> dict[str, Any]:
    """Choose the phrases of ``run`` (a ``Pipeline``): the ``--phrases`` most frequent candidates and the
    listed ones, with the listed phrases' words that the vocabulary lacks."""
    s, vocab = run.settings, run.records["vocab"]
    if not spaced(run):
        named = (
            getattr(s, "language", None)
            or ", ".join(corpus_languages(s))
            or f"the {run.splitter.name} splitter"
        )
        logger.info("no phrases for %s: written without spaces between words", named)
        return {"phrases": [], "counts": [], "scores": [], "words": [], "word_counts": [], "listed": 0}
    stored = run.stored_corpus(vocab["lowercase"])
    if stored is None or not stored.has_links():
        raise InputError("phrases are chosen on the stored corpus: not with --ray (or rerun without it)")
    corpus_counts = dict(zip(stored.words, stored.counts.tolist(), strict=True))
    words = list(vocab["words"])
    listed = [] if s.phrases_from is None else read_phrase_list(Path(s.phrases_from), s.phrase.max_words)
    if vocab["lowercase"]:
        listed = [[w.lower() for w in p] for p in listed]
    known = set(words)
    extra = sorted({w for p in listed for w in p if w not in known and corpus_counts.get(w, 0) > 0})
    units = words + extra
    counts = np.asarray([*vocab["counts"], *(corpus_counts[w] for w in extra)], np.float64)
    row = {w: i for i, w in enumerate(units)}
    chunks = lambda: stored.runs(units)  # noqa: E731
    choice = choose(chunks, counts, int(vocab["tokens"]), s.phrases, s.phrase)
    wanted = [tuple(row.get(w, -1) for w in p) for p in listed]
    kept, found = settle(
        chunks, choice, [p for p in wanted if min(p) >= 0], len(units), s.phrases, s.phrase.min_count
    )
    phrases = [" ".join(units[r] for r in rows) for rows in kept]
    scores = dict(zip(choice.words, choice.scores, strict=True))
    named = {" ".join(p) for p in listed}  # the list's phrases (de-duplicated when it was read)
    missing = len(named - set(phrases))
    if missing:
        said = (
            "phrase never occurs in the corpus: it gets"
            if missing == 1
            else "phrases never occur in the corpus: they get"
        )
        logger.warning("%d listed %s no row", missing, said)
    logger.info(
        "chose %d phrases (%d listed), e.g. %s",
        len(phrases),
        len(named) - missing,
        ", ".join(repr(p) for p in phrases[:8]),
    )
    return {
        "phrases": phrases,
        "counts": found,  # occurrences as encoding finds them (what the sentence choice fills)
        "scores": [round(scores.get(p, 0.0), 2) for p in kept],  # 0: listed, not a candidate
        "words": extra,
        "word_counts": [corpus_counts[w] for w in extra],
        "listed": len(named) - missing,
    }


def units(run: Any) -> tuple[list[str], list[int]]:
    """What stage 1 covers (the vocabulary's words, then the listed phrases' words it lacked, then the
    phrases) and their corpus counts."""
    vocab = run.records["vocab"]
    found = run.records.get("phrases")
    if found is None:
        return list(vocab["words"]), list(vocab["counts"])
    entries = [*vocab["words"], *found["words"], *found["phrases"]]
    return entries, [*vocab["counts"], *found["word_counts"], *found["counts"]]


def unit_targets(run: Any) -> list[int]:
    """Occurrences each of ``units`` should get: the words' targets, the rare words' for the listed
    phrases' words, ``--phrase-per-phrase`` for each phrase."""
    s, vocab = run.settings, run.records["vocab"]
    found = run.records.get("phrases") or {"words": [], "phrases": []}
    targets = s.word_targets(len(vocab["words"]))
    rare = [s.sentences_per_rare_word] * len(found["words"])
    return [*targets, *rare, *[s.phrase.per_phrase] * len(found["phrases"])]


def starting_rows(stage2: StaticModel, settings: Any) -> StaticModel:
    """``stage2`` as distillation starts from it: the phrases' rows as ``--phrase-init`` says (``context``:
    stage 1's, through the PCA; ``zero``: nothing, so a phrase moves a text only as far as it learns to)."""
    if settings.phrase.init != "zero" or not stage2.phrases:
        return stage2
    vectors = dequantize(stage2.vectors, stage2.scales).copy()
    vectors[[i for i, entry in enumerate(stage2.vocab) if is_phrase(entry)]] = 0.0
    return stage2.replace(vectors=vectors, scales=None)
