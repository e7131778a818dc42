"""Stage 2, sentence-level PCA ("all-but-the-top" on sentence vectors), METHOD.md §1.

Sentences are encoded as the plain mean of their stage-1 word vectors; PCA on these gives the mean
X̄ and the directions W. Each word becomes ``(E(w) − X̄) · W[k : k + D]ᵀ``: centred, the top ``k``
directions (frequency and other non-semantic signal) removed, the next ``D`` kept.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from sklearn.decomposition import PCA

from staticsem.errors import InputError
from staticsem.io.atomic import save_tensors
from staticsem.model import StaticModel

logger = logging.getLogger(__name__)

ABTT_FILE = "abtt.safetensors"  # the PCA step's fit, in the work folder


@dataclass
class ABTT:
    """The fitted projection: sentence mean, removed and kept directions, explained variance."""

    mean: np.ndarray  # d
    removed: np.ndarray  # k × d
    kept: np.ndarray  # D × d
    explained: np.ndarray  # variance ratio of the first k + D components

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        """Project word vectors (V × d) to V × D."""
        return ((vectors - self.mean) @ self.kept.T).astype(np.float32)

    def save(self, path: Path) -> None:
        """Write the fit to ``path`` (safetensors, atomically; the removed directions as ``components``)."""
        tensors = {
            "mean": self.mean,
            "components": self.removed,
            "kept": self.kept,
            "explained": self.explained,
        }
        save_tensors(path, tensors)

    @classmethod
    def load(cls, path: Path) -> ABTT:
        """The fit ``save`` wrote to ``path``."""
        tensors = load_file(str(path))
        return cls(tensors["mean"], tensors["components"], tensors["kept"], tensors["explained"])


def default_remove_top(width: int) -> int:
    """The paper's k ≈ d/100 (7 for 768 dims)."""
    return max(1, round(width / 100))


def fit_abtt(stage1: StaticModel, sentences: Sequence[str], remove_top: int, dim: int, seed: int = 0) -> ABTT:
    """Fit the sentence-level PCA on ``sentences`` encoded with the stage-1 model.

    :raises InputError: when too few sentences have a known word or the sizes do not fit.
    """
    means = stage1.encode(list(sentences), normalize=False)
    means = means[np.any(means != 0, axis=1)]
    width = stage1.dim
    if remove_top < 0 or dim < 1 or remove_top + dim > width:
        raise InputError(f"cannot remove {remove_top} and keep {dim} of {width} dimensions")
    if len(means) < remove_top + dim:
        raise InputError(
            f"sentence PCA needs at least {remove_top + dim} sentences with known words, got {len(means)}"
        )
    pca = PCA(n_components=remove_top + dim, svd_solver="full", random_state=seed).fit(means)
    logger.info(
        "sentence PCA on %d sentences: top %d components hold %.1f %% of the variance",
        len(means),
        remove_top,
        100 * pca.explained_variance_ratio_[:remove_top].sum(),
    )
    components = pca.components_.astype(np.float32)
    return ABTT(
        pca.mean_.astype(np.float32),
        components[:remove_top],
        components[remove_top:],
        pca.explained_variance_ratio_.astype(np.float32),
    )


def sentence_pca(
    stage1: StaticModel,
    sentences: Sequence[str],
    sample_size: int,
    remove_top: int | None,
    dim: int,
    seed: int = 0,
) -> tuple[StaticModel, ABTT]:
    """Stage 2 from stage 1: ABTT fitted on ``sample_size`` of ``sentences`` (drawn with ``seed``), the top
    ``remove_top`` components removed [teacher width / 100] and at most ``dim`` kept; the projected table and
    the fit."""
    rng = np.random.default_rng(seed)
    sample = [sentences[i] for i in sorted(rng.permutation(len(sentences))[:sample_size])]
    top = default_remove_top(stage1.dim) if remove_top is None else remove_top
    abtt = fit_abtt(stage1, sample, top, min(dim, stage1.dim - top), seed)
    stage2 = StaticModel(
        stage1.vocab,
        abtt.apply(stage1.vectors),
        tokenizer=stage1.tokenizer,
        metadata={"method": "swe", "stage": "pca"},
        splitter=stage1.splitter.name,
        phrases=stage1.phrase_mode,
    )
    return stage2, abtt
