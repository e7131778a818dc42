"""What an SWE run over several languages adds to the one-language steps: each language's share of the
vocabulary, the checks made before any teacher pass (the teacher's tokenizer reads every language, the
work folder belongs to these languages, every language has sentences), and short sentences per language."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from staticsem.distillation.corpus.languages import (
    SPACELESS,
    apportion,
    base_language,
    hand_over,
    share_vocabulary,
)
from staticsem.distillation.corpus.reading import CorpusOptions, iter_sentences, open_corpus
from staticsem.distillation.corpus.sampling import sample_sentences
from staticsem.distillation.corpus.scan import stream_sentences
from staticsem.distillation.corpus.vocabulary import listed_words
from staticsem.distillation.methods.swe.settings import SHORT_WORDS
from staticsem.errors import InputError
from staticsem.io.atomic import atomic_file

logger = logging.getLogger(__name__)

LANGUAGES_FILE = "languages.json"  # the languages a work folder's build is for
# a tokenizer reads a language when a sample of its corpus has at most 1 % unknown tokens and at most this
# many tokens a character: multilingual-e5-small 0.23-0.29 on Latin, Arabic, Vietnamese text and 0.55-0.67
# on Chinese, Japanese, Korean; all-MiniLM-L6-v2 (English WordPiece) 0.67-1.30 and 1.9-2.9 there
TOKENS_PER_CHAR = {"dense": 1.0, "spaced": 0.5}
DENSE = SPACELESS | {"ko"}  # scripts of many characters a word: unspaced ones and Hangul
SAMPLE = 200  # sentences per language for the tokenizer check


def run_languages(pipeline: Any) -> None:
    """Stage 1 of each language of ``pipeline`` (its ``subruns``): the work folder claimed, the teacher's
    tokenizer checked, every language counted and its sentences chosen before the first teacher pass."""
    runs: dict[str, Any] = pipeline.subruns
    claim_work(pipeline.work.folder, list(runs))
    if pipeline.settings.check_tokenizer:
        samples = {lang: corpus_sample(run.settings.corpus, run.options) for lang, run in runs.items()}
        check_coverage(pipeline.teacher.subword_tokenizer, samples, pipeline.teacher.id)
    if pipeline.settings.hand_over:
        hand_over_words(pipeline)
    for language, run in runs.items():
        try:
            _share_teacher(pipeline, run, ("vocab", "select"))
        except InputError as exc:  # e.g. no sentence of the language is left after filtering
            raise InputError(f"{language}: {exc}") from None
    for language, run in runs.items():
        _share_teacher(pipeline, run, ("extract",))
        pipeline.records.update({f"{step}-{language}": record for step, record in run.records.items()})


def hand_over_words(pipeline: Any) -> None:
    """``--hand-over``: each language's share of ``--vocab-size`` capped at its words with ``--min-count``
    (each corpus counted: stored once, as its vocabulary step reads it), the rest handed to English first,
    then to the others with room; the runs resized to their new shares."""
    if pipeline.scale is not None:  # on by default: a Ray build goes on with the shares as they are
        logger.warning(
            "--ray: no hand-over of words (it counts the corpora here); each language keeps its share"
        )
        return
    runs: dict[str, Any] = pipeline.subruns
    usable: dict[str, int] = {}
    for language, run in runs.items():
        try:
            run._teacher = run._teacher or pipeline._teacher
            usable[language] = usable_words(run)
            pipeline._teacher = run._teacher
        except InputError as exc:
            raise InputError(f"{language}: {exc}") from None
    shares = {language: run.settings.vocab_size for language, run in runs.items()}
    first = next((language for language in runs if base_language(language) == "en"), None)
    handed = hand_over(shares, usable, dict.fromkeys(runs, 1.0), first)
    for language, run in runs.items():
        run.resize(handed[language])
    pipeline.forget_keys()  # the merge's key and those after it follow the new shares


def usable_words(run: Any) -> int:
    """How many words a language's ``run`` can keep: those seen ``--min-count`` times, of its
    ``--vocabulary`` list where it has one (as its vocabulary step keeps them)."""
    stored, min_count = run.count_corpus(), run.settings.min_count
    listed = listed_words(run.settings.vocabulary, run.teacher.lowercases)
    if listed is None:
        return int((stored.counts >= min_count).sum())
    counts = stored.counter()
    return sum(1 for word in listed if counts.get(word, 0) >= min_count)


def _share_teacher(pipeline: Any, run: Any, steps: tuple[str, ...]) -> None:
    """Run ``steps`` of a language's ``run`` with one teacher for every language (loaded when needed)."""
    run._teacher = run._teacher or pipeline._teacher
    run.run_steps(steps, run.keys)
    pipeline._teacher = run._teacher


def vocabulary_shares(settings: Any, sources: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Words each language gets of ``settings.vocab_size`` by ``settings.vocab_split`` (``corpus``:
    in proportion to the lines of its corpus files)."""
    sizes = {lang: 1 for lang in sources}
    if settings.vocab_split == "corpus":
        sizes = {lang: sum(_lines(source) for source in files) for lang, files in sources.items()}
    return share_vocabulary(settings.vocab_size, sizes, settings.vocab_split)


def _lines(source: str) -> int:
    """Lines of a corpus file (``.gz`` read through)."""
    with open_corpus(Path(source)) as handle:
        return sum(1 for _ in handle)


def claim_work(folder: Path, languages: Sequence[str]) -> None:
    """Mark ``folder`` as the work of a build in ``languages``; refuse one made for other languages."""
    path = folder / LANGUAGES_FILE
    if path.is_file():
        before = json.loads(path.read_text(encoding="utf-8")).get("languages")
        if before != list(languages):
            raise InputError(
                f"{folder} holds a build in {','.join(before or [])}, not {','.join(languages)}: give "
                "another --out or --work-dir (or delete that folder to start afresh)"
            )
        return
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps({"languages": list(languages)}), encoding="utf-8")


def check_coverage(tokenizer: Tokenizer, samples: Mapping[str, Sequence[str]], teacher: str) -> None:
    """Raise ``InputError`` when ``tokenizer`` (the teacher's) does not read one of the languages: too many
    unknown tokens, or too many tokens a character, in a sample of its sentences."""
    tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a copy without padding or truncation
    tokenizer.no_padding()
    tokenizer.no_truncation()
    unknown_token = getattr(tokenizer.model, "unk_token", None)
    unknown = tokenizer.token_to_id(unknown_token) if unknown_token else None
    for lang, sentences in samples.items():
        encoded = tokenizer.encode_batch(list(sentences), add_special_tokens=False)
        tokens = sum(len(e.ids) for e in encoded)
        chars = sum(len(s) for s in sentences)
        unknowns = sum(e.ids.count(unknown) for e in encoded) if unknown is not None else 0
        limit = TOKENS_PER_CHAR["dense" if base_language(lang) in DENSE else "spaced"]
        if tokens and (unknowns > 0.01 * tokens or tokens > limit * chars):
            raise InputError(
                f"teacher {teacher!r} has no multilingual tokenizer: it reads {lang} as {tokens / chars:.2f} "
                f"tokens a character, {100 * unknowns / tokens:.1f} % unknown (at most {limit} and 1 %)"
            )


def corpus_sample(sources: Sequence[str], options: CorpusOptions, count: int = SAMPLE) -> list[str]:
    """The first ``count`` sentences of ``sources`` within ``options``."""
    return list(itertools.islice(iter_sentences(sources, options), count))


def short_sentences(
    runs: Mapping[str, Any], count: int, exclude: set[str], seed: int, hand_on: bool = False
) -> dict[str, list[str]]:
    """``count`` random corpus sentences of ``SHORT_WORDS`` words outside ``exclude``, drawn from each
    language's run of ``runs`` in proportion to the sentences stage 1 chose in it (one run: all of them);
    per language, in ``runs``' order. ``hand_on``: a language with fewer than its share hands the rest on
    to the others, in proportion to their chosen sentences (``corpus.languages.hand_over``)."""
    chosen = {lang: len(run.records["select"]["sentences"]) for lang, run in runs.items()}
    quotas = short_counts(count, chosen)
    candidates: Mapping[str, Iterable[str]] = {lang: short_candidates(run) for lang, run in runs.items()}
    if hand_on:
        held = {lang: list(found) for lang, found in candidates.items()}
        available = {lang: sum(1 for s in found if s not in exclude) for lang, found in held.items()}
        quotas = hand_over(quotas, available, {lang: float(n) for lang, n in chosen.items()})
        candidates = held
    return {lang: sample_sentences(candidates[lang], n, exclude, seed) for lang, n in quotas.items()}


def short_candidates(run: Any) -> Iterator[str]:
    """A run's corpus sentences of ``SHORT_WORDS`` words, in order: of the corpus its vocabulary step stored
    where that holds them all (its limits hold the short lengths, no sentence limit), else read again."""
    lengths = replace(run.options, min_words=SHORT_WORDS[0], max_words=SHORT_WORDS[1])
    options = run.options
    stored = run.stored_corpus(run.records["vocab"]["lowercase"]) if "vocab" in run.records else None
    within = options.min_words <= SHORT_WORDS[0] and SHORT_WORDS[1] <= options.max_words
    if stored is None or not within or options.max_sentences is not None:
        return stream_sentences(run.settings.corpus, lengths, workers=run.workers)
    sizes = stored.lengths()
    return stored.texts(np.flatnonzero((sizes >= SHORT_WORDS[0]) & (sizes <= SHORT_WORDS[1])))


def short_counts(total: int, chosen: Mapping[str, int]) -> dict[str, int]:
    """``total`` short sentences shared by the languages in proportion to their ``chosen`` sentences."""
    return apportion(total, {lang: float(n) for lang, n in chosen.items()})
