"""Cross-lingual models (METHOD.md §1, stage 3b): per-language corpora and the vocabulary merge.

Stage 1 runs once per language with a multilingual teacher; the merge joins the vocabularies into
one table, averaging the vectors of identical strings (``die`` in English and German, names,
numbers). PCA and training then see the sentences of every language.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from staticsem.distillation.corpus import untag
from staticsem.errors import InputError


def language_sources(settings: Any) -> dict[str, tuple[str, ...]]:
    """Corpus sources per language when ``settings`` asks for a run over several languages, else ``{}``.

    Either every source is tagged (``en=a.txt``, ``de=b.txt``) or none is; an untagged corpus is split
    by language identification when ``settings.languages`` names two or more languages.
    """
    tagged = [untag(source) for source in settings.corpus]
    tags = [language for language, _ in tagged]
    if any(tags) and not all(tags):
        raise InputError("tag every corpus with its language (de=FILE) or none of them")
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
