"""Fusing ranked lists (dense and BM25) into one ranking.

``rrf``: reciprocal-rank fusion, ``sum_m w_m / (rrf_k + rank_m(d))`` (Cormack et al. 2009); ranks only,
so the two scales never need to agree. ``convex``: ``sum_m w_m * minmax_m(score_m(d))``, each list's
scores min-max scaled to [0, 1] over its candidates (a document missing from a list gets 0 there).
Measured on SciFact in ``benchmarks/search.py`` (docs/benchmarks/search-and-serving.md): with a static model's
dense list far weaker than BM25 (47 vs 70 nDCG@10), RRF at equal weights falls to 61.6 and no RRF weight
beats BM25 alone, while ``convex`` with dense weight 0.25 (chosen on each half of the queries, scored on
the other) reaches 70.9. That is the default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from staticsem.errors import InputError

METHODS = ("rrf", "convex")


@dataclass(frozen=True)
class FusionSettings:
    """How hybrid search fuses its dense and BM25 lists, each ``depth`` candidates long (default: convex,
    0.25 dense + 0.75 BM25, measured on SciFact)."""

    method: str = "convex"
    dense_weight: float = 0.25
    bm25_weight: float = 0.75
    rrf_k: float = 60.0
    depth: int = 100

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InputError(f"unknown fusion {self.method!r}; choose one of {', '.join(METHODS)}")
        if min(self.dense_weight, self.bm25_weight) < 0 or self.dense_weight + self.bm25_weight == 0:
            raise InputError("fusion weights must be >= 0 and not both 0")
        if self.rrf_k < 0 or self.depth < 1:
            raise InputError("rrf_k must be >= 0 and depth >= 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _minmax(scores: Sequence[float]) -> list[float]:
    low, high = min(scores), max(scores)
    return [1.0] * len(scores) if high == low else [(s - low) / (high - low) for s in scores]


def fuse(lists: Sequence[Sequence[tuple[int, float]]], weights: Sequence[float], settings: FusionSettings):
    """One ranking ``[(key, fused score)]``, best first, from ranked ``[(key, score)]`` lists."""
    fused: dict[int, float] = {}
    for ranked, weight in zip(lists, weights, strict=True):
        if not ranked:
            continue
        if settings.method == "rrf":
            parts = [weight / (settings.rrf_k + rank) for rank in range(1, len(ranked) + 1)]
        else:
            parts = [weight * s for s in _minmax([score for _, score in ranked])]
        for (key, _), part in zip(ranked, parts, strict=True):
            fused[key] = fused.get(key, 0.0) + part
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))
