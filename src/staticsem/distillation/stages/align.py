"""Aligning the languages of one model: each language's sentences mapped onto the teacher's shared space.

A multilingual teacher places a sentence and its translation close together; a static model merged from
per-language tables does not quite: each language's sentence vectors keep a language-specific mean and a
few dominant directions of their own, and their axes differ by more than a rotation. For each language ℓ
an affine map f_ℓ(x) = x A_ℓ + c_ℓ is fitted on a sample of its chosen sentences (the model's mean of
rows x, the teacher's embedding t), in three steps composed into one:

1. centre on the language's mean and remove its top ``components`` principal directions (ABTT per
   language);
2. ridge regression onto the teacher's embeddings, centred on their mean over every language and
   projected on their top ``dim`` principal components (scikit-learn's PCA), so the model keeps its width;
3. step 1 again on the mapped sentences.

A text's vector is a mean of rows, and an affine map commutes with a mean, so the maps are baked into the
rows: a word's row becomes Σ_ℓ π_wℓ f_ℓ(row), π_w its share of each language's corpus (relative
frequency); a word no language counted gets the mean map, and so do the subword pieces unless they get a
map of their own (``fit_piece_map``: fitted as a language's, on every language's sentences read from
pieces alone, the way a language without text of its own is read). Encoding is unchanged: no language
identification, no extra cost. Numpy and scikit-learn only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from staticsem.distillation.stages.align_settings import EARLIER_COMPONENTS
from staticsem.errors import InputError
from staticsem.model import StaticModel
from staticsem.pieces import PieceTable

# principal directions removed per language, before and after the map: these functions' default (the
# models before 2026-11-30); a build removes --align-components (stages.align_settings.DIRECTIONS)
COMPONENTS = EARLIER_COMPONENTS
RIDGE = 1e-2  # the regression's penalty, relative to the mean eigenvalue of its Gram matrix
SVD_ROWS = 8_000  # sentences of a language whose principal directions step 1 removes


@dataclass(frozen=True)
class Affine:
    """x ↦ x A + c for row vectors x (A: D_in × D_out)."""

    matrix: np.ndarray
    offset: np.ndarray

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x @ self.matrix + self.offset

    def then(self, other: Affine) -> Affine:
        """This map followed by ``other``."""
        return Affine(self.matrix @ other.matrix, self.offset @ other.matrix + other.offset)


@dataclass(frozen=True)
class LanguageSample:
    """A language's sentences and the teacher's embeddings of them (one row each)."""

    sentences: Sequence[str]
    targets: np.ndarray


def without_top(x: np.ndarray, components: int) -> Affine:
    """Centring on ``x``'s mean and removing its top ``components`` principal directions."""
    mean = x.mean(axis=0)
    top = np.linalg.svd(x[:SVD_ROWS] - mean, full_matrices=False)[2][:components]
    keep = np.eye(x.shape[1]) - top.T @ top
    return Affine(keep, -mean @ keep)


def ridge(x: np.ndarray, y: np.ndarray, penalty: float = RIDGE) -> Affine:
    """The least-squares affine map of ``x`` onto ``y`` with a ridge penalty."""
    ones = np.hstack([x, np.ones((len(x), 1))])
    gram = ones.T @ ones
    scale = penalty * np.trace(gram) / len(gram)
    solved = np.linalg.solve(gram + scale * np.eye(len(gram)), ones.T @ y)
    return Affine(solved[:-1], solved[-1])


def shared_space(samples: Mapping[str, LanguageSample], dim: int) -> Any:
    """The teacher's shared space: the top ``dim`` principal components (scikit-learn's PCA) of every
    language's teacher embeddings, each scaled to unit length."""
    from sklearn.decomposition import PCA

    return PCA(dim, random_state=0).fit(np.vstack([_unit(s.targets) for s in samples.values()]))


def shared_targets(space: Any, targets: np.ndarray, components: int = COMPONENTS) -> np.ndarray:
    """One language's teacher embeddings in ``space``, centred and without their top ``components``
    directions, as its mapped sentences are (step 3): what the alignment's refinement trains towards."""
    projected = space.transform(_unit(targets))
    return without_top(projected, components)(projected).astype(np.float32)


def fitted_map(x: np.ndarray, y: np.ndarray, components: int = COMPONENTS) -> Affine:
    """Steps 1–3 of the module's map for sentences ``x`` and their teacher embeddings ``y`` in the shared
    space."""
    first = without_top(x, components)
    mapping = first.then(ridge(first(x), y))
    return mapping.then(without_top(mapping(x), components))


def pieces_only(model: StaticModel) -> StaticModel:
    """``model`` reading every word from its subword pieces (no word rows; for fitting the pieces' map).

    :raises InputError: for a model without pieces.
    """
    if model.pieces is None:
        raise InputError("the model has no subword pieces to map")
    nothing = np.zeros((1, model.dim), dtype=np.float32)
    return StaticModel(
        ["\x00"], nothing, tokenizer=model.tokenizer, pieces=model.pieces, splitter=model.splitter.name
    )


def fit_piece_map(
    model: StaticModel, samples: Mapping[str, LanguageSample], space: Any, components: int = COMPONENTS
) -> Affine:
    """The pieces' own map: fitted as a language's (the module's steps), on every language's sample read
    from pieces alone and the teacher's embeddings of it in ``space``."""
    reader = pieces_only(model)
    x = np.vstack([reader.encode(list(s.sentences), normalize=False) for s in samples.values()])
    y = np.vstack([space.transform(_unit(s.targets)) for s in samples.values()])
    return fitted_map(x.astype(np.float64), y, components)


def fit_language_maps(
    model: StaticModel,
    samples: Mapping[str, LanguageSample],
    components: int = COMPONENTS,
    space: Any = None,
) -> dict[str, Affine]:
    """Each language's map onto the teacher's shared space (see the module's steps; ``space``: from
    ``shared_space``, fitted on ``samples`` when not given).

    :raises InputError: for a language with fewer sentences than the model has dimensions.
    """
    for language, sample in samples.items():
        if len(sample.sentences) <= model.dim or len(sample.sentences) != len(sample.targets):
            raise InputError(
                f"{language}: {len(sample.sentences)} sentences ({len(sample.targets)} teacher embeddings) "
                f"cannot fit a map of {model.dim} dimensions"
            )
    space = shared_space(samples, model.dim) if space is None else space
    maps = {}
    for language, sample in samples.items():
        x = model.encode(list(sample.sentences), normalize=False).astype(np.float64)
        maps[language] = fitted_map(x, space.transform(_unit(sample.targets)), components)
    return maps


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), np.finfo(np.float64).tiny)


def language_shares(vocab: Sequence[str], counts: Mapping[str, Mapping[str, int]]) -> np.ndarray:
    """V × L: each word's relative frequency in each language's corpus, normalised over the languages
    (a row of 1/L for a word no language counted)."""
    index = {word: i for i, word in enumerate(vocab)}
    shares = np.zeros((len(vocab), len(counts)))
    for column, language_counts in enumerate(counts.values()):
        total = max(sum(language_counts.values()), 1)
        for word, count in language_counts.items():
            row = index.get(word)
            if row is not None:
                shares[row, column] += count / total
    shares[shares.sum(axis=1) == 0] = 1.0
    return shares / shares.sum(axis=1, keepdims=True)


def mean_map(maps: Mapping[str, Affine]) -> Affine:
    """The mean of the languages' maps (for pieces and words of no language)."""
    return Affine(
        np.mean([m.matrix for m in maps.values()], axis=0), np.mean([m.offset for m in maps.values()], axis=0)
    )


def align_rows(
    model: StaticModel, maps: Mapping[str, Affine], shares: np.ndarray, piece_map: Affine | None = None
) -> StaticModel:
    """``model`` with each row mapped by its languages' maps (weighted by ``shares``, columns in ``maps``'
    order) and its pieces by ``piece_map`` (default: the mean map): float32 rows, other parts as they
    were."""
    rows = np.asarray(model.vectors, dtype=np.float64)
    aligned = np.zeros((len(rows), model.dim))
    for column, mapping in enumerate(maps.values()):
        used = np.flatnonzero(shares[:, column] > 0)
        aligned[used] += shares[used, column : column + 1] * mapping(rows[used])
    pieces = model.pieces
    if pieces is not None:
        mapping = mean_map(maps) if piece_map is None else piece_map
        mapped = mapping(pieces.vectors.astype(np.float64)).astype(np.float32)
        pieces = PieceTable(mapped, pieces.tokenizer, pieces.weight)
    return model.replace(vectors=aligned.astype(np.float32), pieces=pieces, scales=None)
