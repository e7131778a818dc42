"""The two analyses of the SWE paper, for any static model.

(a) **Principal components removed by ABTT**: which words load most on them, and how each component's
    loading correlates with word frequency. An SWE distillation keeps what its pipeline saw in
    ``analysis.safetensors``, in its work folder ``.NAME.work`` beside the model (and in the model folder
    with ``--keep-analysis``) (``stage1``: V × d pre-ABTT vectors, ``mean``: the sentence mean X̄,
    ``components``: k × d removed components, ``counts``: V corpus counts, optionally ``explained``: the
    variance share of each component); without it the components are
    fitted here, by PCA over sentence vectors (plain means of the model's own word vectors) of the STS
    sentences, and frequencies come from a ``word<TAB>count`` file. A word's loading on component u is
    ⟨w − X̄, u⟩: the amount ABTT removes from it.
(b) **Vector norm** against word frequency and against the word's influence on sentence embeddings:
    the mean of 1 − cos(s, s without the word) over the sentences that contain it.

Correlations are Spearman (rank-based, so log or raw counts give the same value).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.distillation.checkpoint import ANALYSIS_FILE, work_folder
from staticsem.errors import InputError, ModelFormatError
from staticsem.model import StaticModel
from staticsem.quantize import dequantize
from staticsem.text import split_words

logger = logging.getLogger(__name__)
KEEP_HINT = (
    "rerun the same `staticsem distill` command with --keep-analysis (every finished step is reused) "
    f"to put {ANALYSIS_FILE} in the model folder"
)
DEFAULT_FREQ = "auxiliary/enwiki_word_freq_min200.tsv"


@dataclass
class Inputs:
    """What the analyses need, and where each piece came from."""

    words: list[str]
    vectors: np.ndarray  # the model's final vectors (V × D), float32
    stage: np.ndarray  # the vectors the components were removed from (V × d)
    mean: np.ndarray  # X̄ (d)
    components: np.ndarray  # k × d, unit rows
    counts: np.ndarray  # V, NaN where unknown
    sources: dict[str, str] = field(default_factory=dict)
    explained: list[float] | None = None  # variance share of each component, when known


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    keep = np.isfinite(a) & np.isfinite(b)
    if keep.sum() < 3 or np.ptp(a[keep]) == 0 or np.ptp(b[keep]) == 0:
        return float("nan")
    return float(spearmanr(a[keep], b[keep]).statistic)


def read_counts(path: Path, words: Sequence[str]) -> np.ndarray:
    """Counts of ``words`` from a ``word<TAB>count`` file (exact, then lower-case); NaN where missing.

    :raises InputError: when the file is missing or a count is not a number.
    """
    if not path.is_file():
        raise InputError(f"word frequency file {path} not found (give one with --freq)")
    table: dict[str, float] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            word, _, count = line.rstrip("\n").partition("\t")
            if not word:
                continue
            try:
                table.setdefault(word, float(count))
            except ValueError:
                raise InputError(f"{path}:{number}: count {count!r} is not a number") from None
    return np.array([table.get(w, table.get(w.lower(), np.nan)) for w in words], dtype=np.float64)


def sentence_ids(model: StaticModel, sentences: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(owner sentence, vocabulary row) of every known word occurrence, by the model's lookup rule."""
    rows: dict[str, int] = {}
    owners: list[int] = []
    ids: list[int] = []
    for i, sentence in enumerate(sentences):
        for word in split_words(sentence):
            row = rows.get(word)
            if row is None:
                try:
                    row = model.word_index(word)
                except InputError:
                    row = -1
                rows[word] = row
            if row >= 0:
                owners.append(i)
                ids.append(row)
    return np.array(owners, dtype=np.int64), np.array(ids, dtype=np.int64)


def sentence_sums(
    vectors: np.ndarray, owners: np.ndarray, ids: np.ndarray, sentences: int, block: int = 65536
) -> np.ndarray:
    """Sum of each sentence's word vectors (float64), from occurrences sorted by sentence."""
    sums = np.zeros((sentences, vectors.shape[1]), dtype=np.float64)
    for start in range(0, len(ids), block):
        part_owner = owners[start : start + block]
        rows, first = np.unique(part_owner, return_index=True)
        sums[rows] += np.add.reduceat(vectors[ids[start : start + block]].astype(np.float64), first, axis=0)
    return sums


def prepare(
    model: StaticModel,
    sentences: Sequence[str],
    *,
    folder: Path | None = None,
    freq_file: Path | None = None,
    components: int = 5,
) -> Inputs:
    """Gather the inputs: ``analysis.safetensors`` in ``folder`` or its work folder, else fit them.

    :raises ModelFormatError: when ``analysis.safetensors`` does not fit the model (numbers in the message).
    :raises InputError: when neither the analysis file's counts nor ``freq_file`` give frequencies.
    """
    vectors = dequantize(model.vectors, model.scales).astype(np.float32, copy=False)
    stored = find_analysis(folder)
    if stored is not None:
        return _stored(model, vectors, stored, freq_file)
    hint = f"; or {KEEP_HINT}" if model.metadata.get("method") == "swe" else ""
    if freq_file is None:
        raise InputError(f"no {ANALYSIS_FILE} with the model: give a word frequency file (--freq){hint}")
    if hint:
        logger.warning(
            "no %s beside %s or in its work folder: fitting the components here%s",
            ANALYSIS_FILE,
            folder,
            hint,
        )
    owners, ids = sentence_ids(model, sentences)
    used = np.unique(owners)
    if len(used) <= components:
        raise InputError(
            f"only {len(used)} sentences have a known word; need more to fit {components} components"
        )
    sums = sentence_sums(vectors, owners, ids, len(sentences))
    lengths = np.bincount(owners, minlength=len(sentences))[used]
    means = sums[used] / lengths[:, None]
    center = means.mean(axis=0)
    _, singular, vt = np.linalg.svd(means - center, full_matrices=False)
    share = singular**2 / float((singular**2).sum())
    return Inputs(
        words=list(model.vocab),
        vectors=vectors,
        stage=vectors,
        mean=center.astype(np.float32),
        components=vt[:components].astype(np.float32),
        counts=read_counts(freq_file, model.vocab),
        sources={
            "components": f"fitted here: PCA over {len(used):,} sentence means of the model's own vectors "
            f"(the model may already have had its top components removed{hint})",
            "frequency": str(freq_file),
        },
        explained=[float(s) for s in share[:components]],
    )


def find_analysis(folder: Path | None) -> Path | None:
    """``analysis.safetensors`` in the model folder, else in the work folder left beside it."""
    if folder is None or not folder.is_dir():
        return None
    for candidate in (folder / ANALYSIS_FILE, work_folder(folder.resolve()) / ANALYSIS_FILE):
        if candidate.is_file():
            return candidate
    return None


def _stored(model: StaticModel, vectors: np.ndarray, path: Path, freq_file: Path | None) -> Inputs:
    from safetensors.numpy import load_file

    try:
        tensors = load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types for damaged files
        raise ModelFormatError(f"{path}: cannot read ({exc})") from None
    missing = [k for k in ("stage1", "mean", "components") if k not in tensors]
    if missing:
        raise ModelFormatError(f"{path}: missing tensors {missing}")
    stage, mean, comps = (tensors[k].astype(np.float32) for k in ("stage1", "mean", "components"))
    if stage.shape[0] != len(model) or comps.ndim != 2 or mean.shape != (stage.shape[1],):
        raise ModelFormatError(
            f"{path}: stage1 is {stage.shape}, mean {mean.shape}, components {comps.shape}, "
            f"but the model has {len(model)} words"
        )
    if comps.shape[1] != stage.shape[1]:
        raise ModelFormatError(f"{path}: components have {comps.shape[1]} dims, stage1 has {stage.shape[1]}")
    comps = comps / np.maximum(np.linalg.norm(comps, axis=1, keepdims=True), 1e-12)
    if "counts" in tensors:
        counts = tensors["counts"].astype(np.float64)
        if counts.shape != (len(model),):
            raise ModelFormatError(
                f"{path}: counts has shape {counts.shape}, the model has {len(model)} words"
            )
        counts = np.where(counts > 0, counts, np.nan)
        frequency = f"{path.name} (corpus counts of the distillation)"
    elif freq_file is not None:
        counts, frequency = read_counts(freq_file, model.vocab), str(freq_file)
    else:
        raise InputError(f"{path} has no counts: give a word frequency file (--freq)")
    return Inputs(
        words=list(model.vocab),
        vectors=vectors,
        stage=stage,
        mean=mean,
        components=comps,
        counts=counts,
        sources={"components": f"{path.name} (the components ABTT removed)", "frequency": frequency},
        explained=[float(x) for x in tensors["explained"][: len(comps)]] if "explained" in tensors else None,
    )


def component_analysis(inputs: Inputs, top: int = 15) -> dict[str, Any]:
    """Per component: the words loading most in each direction, and the correlations with frequency."""
    loadings = (inputs.stage - inputs.mean) @ inputs.components.T
    out: list[dict[str, Any]] = []
    for i in range(loadings.shape[1]):
        column = loadings[:, i]
        order = np.argsort(column)
        out.append(
            {
                "component": i + 1,
                "explained_variance": None if inputs.explained is None else inputs.explained[i],
                "spearman_loading_frequency": _spearman(column.astype(np.float64), inputs.counts),
                "spearman_abs_loading_frequency": _spearman(np.abs(column).astype(np.float64), inputs.counts),
                "top_positive": [(inputs.words[j], float(column[j])) for j in order[::-1][:top]],
                "top_negative": [(inputs.words[j], float(column[j])) for j in order[:top]],
            }
        )
    return {"components": out, "loadings": loadings}


def influence(
    vectors: np.ndarray, owners: np.ndarray, ids: np.ndarray, sentences: int, block: int = 65536
) -> tuple[np.ndarray, np.ndarray]:
    """Per vocabulary row: mean 1 − cos(sentence, sentence without the word) and the number of sentences.

    A sentence embedding is the normalised sum of its word vectors; removing a word removes every
    occurrence of it. Rows never seen get NaN and 0.
    """
    vocab = len(vectors)
    sums = sentence_sums(vectors, owners, ids, sentences)
    pairs, repeats = np.unique(owners * vocab + ids, return_counts=True)
    pair_owner, pair_id = pairs // vocab, pairs % vocab
    change = np.empty(len(pairs), dtype=np.float64)
    for start in range(0, len(pairs), block):
        part = slice(start, start + block)
        full = sums[pair_owner[part]]
        rest = full - repeats[part, None] * vectors[pair_id[part]]
        norms = np.linalg.norm(full, axis=1) * np.linalg.norm(rest, axis=1)
        cosine = np.divide(np.einsum("ij,ij->i", full, rest), norms, out=np.zeros(len(full)), where=norms > 0)
        change[part] = 1.0 - cosine
    totals = np.bincount(pair_id, weights=change, minlength=vocab)
    seen = np.bincount(pair_id, minlength=vocab)
    return np.divide(totals, seen, out=np.full(vocab, np.nan), where=seen > 0), seen


def norm_analysis(
    inputs: Inputs, model: StaticModel, sentences: Sequence[str], min_sentences: int = 5
) -> dict[str, Any]:
    """Norm vs frequency and vs influence (words seen in at least ``min_sentences`` sentences)."""
    norms = np.linalg.norm(inputs.vectors, axis=1).astype(np.float64)
    owners, ids = sentence_ids(model, sentences)
    effect, seen = influence(inputs.vectors, owners, ids, len(sentences))
    effect = np.where(seen >= min_sentences, effect, np.nan)
    return {
        "words": len(norms),
        "words_with_frequency": int(np.isfinite(inputs.counts).sum()),
        "words_with_influence": int(np.isfinite(effect).sum()),
        "sentences": len(sentences),
        "min_sentences": min_sentences,
        "spearman_norm_frequency": _spearman(norms, inputs.counts),
        "spearman_norm_influence": _spearman(norms, effect),
        "spearman_influence_frequency": _spearman(effect, inputs.counts),
        "norms": norms,
        "influence": effect,
    }
