"""Cross-lingual models (METHOD.md §1, stage 3b): per-language corpora and the vocabulary merge.

Stage 1 runs once per language with a multilingual teacher; the merge joins the vocabularies into
one table, averaging the vectors of identical strings (``die`` in English and German, names,
numbers). PCA and training then see the sentences of every language.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from staticsem.distillation.corpus.languages import check_languages
from staticsem.distillation.corpus.reading import untag
from staticsem.errors import InputError
from staticsem.io import load
from staticsem.io.atomic import save_tensors
from staticsem.model import StaticModel


def language_sources(settings: Any) -> dict[str, tuple[str, ...]]:
    """Corpus sources per language when ``settings`` asks for a run over several languages, else ``{}``.

    Either every source is tagged (``en=a.txt``, ``de=b.txt``) or none is; an untagged corpus is split
    by language identification when ``settings.languages`` names two or more languages.
    """
    tagged = [untag(source) for source in settings.corpus]
    tags = [language for language, _ in tagged]
    if any(tags) and not all(tags):
        raise InputError("tag every corpus with its language (de=FILE) or none of them")
    check_languages([str(tag) for tag in tags if tag] + list(settings.languages))
    if settings.language is not None:  # one language's run of an untagged corpus
        return {}
    if all(tags):
        if settings.languages:
            raise InputError("--languages splits an untagged corpus; the corpora here are tagged already")
        grouped: dict[str, list[str]] = {}
        for language, source in tagged:
            grouped.setdefault(str(language), []).append(source)
        return {language: tuple(sources) for language, sources in grouped.items()} if len(grouped) > 1 else {}
    if not settings.languages:
        return {}
    if len(set(settings.languages)) < 2:
        raise InputError(f"--languages needs two or more languages, got {','.join(settings.languages)}")
    return {language: tuple(settings.corpus) for language in dict.fromkeys(settings.languages)}


def corpus_languages(settings: Any) -> list[str]:
    """The languages ``settings`` names: its corpus tags (in order, once each), else ``--languages``."""
    tags = [language for language, _ in map(untag, settings.corpus) if language]
    return list(dict.fromkeys(tags)) or list(dict.fromkeys(settings.languages))


def merge_vocabularies(
    tables: Mapping[str, tuple[Sequence[str], np.ndarray]],
) -> tuple[list[str], np.ndarray, dict[str, int]]:
    """One vocabulary from per-language ``(words, vectors)``: identical strings get the mean vector.

    Words keep the order of their first language, then new words of the next. Returns the words,
    their vectors and how many words each language shares with an earlier one.
    """
    index: dict[str, int] = {}
    sums: list[np.ndarray] = []
    counts: list[int] = []
    shared: dict[str, int] = {}
    for language, (words, vectors) in tables.items():
        if len(words) != len(vectors):
            raise InputError(f"{language}: {len(words)} words but {len(vectors)} vectors")
        shared[language] = 0
        for word, vector in zip(words, np.asarray(vectors, dtype=np.float64), strict=True):
            row = index.get(word)
            if row is None:
                index[word] = len(sums)
                sums.append(vector.copy())
                counts.append(1)
            else:
                sums[row] += vector
                counts[row] += 1
                shared[language] += 1
    if not sums:
        raise InputError("no words in any language to merge")
    vectors = (np.stack(sums) / np.asarray(counts, dtype=np.float64)[:, None]).astype(np.float32)
    return list(index), vectors, shared


def merge_runs(
    runs: Mapping[str, tuple[Path, Mapping[str, dict[str, Any]]]], folder: Path, method: str, splitter: str
) -> dict[str, Any]:
    """Join the languages' stage-1 results (``runs``: language → its work folder and step records) into
    ``folder``: the merged stage-1 table (splitting words by ``splitter``), every per-sentence row all
    languages have, in language order; returns the merge record (the chosen sentences, the words and their
    summed counts, per-language stats).
    """
    stage1 = {lang: load(work / "stage1") for lang, (work, _) in runs.items()}
    tables = {lang: (model.vocab, model.vectors) for lang, model in stage1.items()}
    words, vectors, shared = merge_vocabularies(tables)
    first = next(iter(stage1.values()))
    StaticModel(
        words,
        vectors,
        tokenizer=first.tokenizer,
        metadata={"method": method, "stage": "extract"},
        splitter=splitter,
        phrases=first.phrase_mode,
    ).save(folder / "stage1", dtype="float32")
    per_run = [load_file(str(work / "stage1.safetensors")) for work, _ in runs.values()]
    shared_keys = set.intersection(*(set(rows) for rows in per_run))  # token_means: every run has them
    save_tensors(
        folder / "stage1.safetensors",
        {key: np.concatenate([rows[key] for rows in per_run]) for key in shared_keys},
    )
    counts: dict[str, int] = {}
    for _, records in runs.values():
        for word, count in zip(records["vocab"]["words"], records["vocab"]["counts"], strict=True):
            counts[word] = counts.get(word, 0) + count
    stats = {lang: records["select"]["stats"] for lang, (_, records) in runs.items()}
    return {
        "sentences": [s for _, records in runs.values() for s in records["select"]["sentences"]],
        "words": words,
        "counts": [counts.get(w, 0) for w in words],
        "stats": {k: sum(st[k] for st in stats.values()) for k in ("sentences_chosen", "reference_passes")},
        "languages": {
            lang: {"words": len(tables[lang][0]), "shared_with_earlier": shared[lang], **stats[lang]}
            for lang in runs
        },
        "words_seen": len(words),
    }
