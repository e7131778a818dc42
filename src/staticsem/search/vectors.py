"""Dense vectors of an index: a usearch HNSW graph (cosine), exact search when small or asked.

Keys are the document keys of the SQLite store. Documents with a zero vector are not added (cosine is
undefined for them); they are found by BM25 only. Each saved state is a file ``vectors-GEN.usearch``
written under a temporary name and renamed; the store records which generation matches its rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from staticsem.errors import InputError, ModelFormatError

DTYPES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "int8": "i8"}
# bfloat16, usearch's own default: builds and searches about 20 % faster than float16 (500k Wikipedia
# sentences: 67 vs 84 s to build, 0.67 vs 0.86 ms at expansion 256) for 0.001–0.003 less recall@10.
DEFAULT_DTYPE = "bfloat16"


@dataclass(frozen=True)
class HnswSettings:
    """usearch's graph settings and the size below which search is exact. ``expansion_search`` is 320,
    not usearch's 64: recall@10 against exact search falls with size (1.5 M Wikipedia sentences: 0.909 at
    64, 0.954 at 128, 0.980 at 256), and the target is 0.98 (``benchmarks/search_scale.py``). The graph
    is built on ``add_threads`` = 1 thread: usearch's concurrent ``add`` leaves nodes stored that no search
    reaches (unum-cloud/USearch#735, in 2.25 and 2.26): at 10k-100k Wikipedia sentences 1-5 in 10,000 on
    every core, none on one. 0 (every core) builds 1.9-2.3x faster (1.5 M: 602 vs 1,161 s)."""

    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 320
    exact_threshold: int = 20_000
    add_threads: int = 1

    def __post_init__(self) -> None:
        if self.add_threads < 0:
            raise InputError(
                f"build threads (add_threads) must be 0 (every core) or more, got {self.add_threads}"
            )


def vector_file(folder: Path, generation: int) -> Path:
    return folder / f"vectors-{generation}.usearch"


class VectorIndex:
    """A usearch index of unit vectors; ``view=True`` memory-maps a saved file read-only."""

    def __init__(self, dim: int, dtype: str, settings: HnswSettings, path: Path | None = None, *, view=False):
        from usearch.index import Index as Usearch

        if dtype not in DTYPES:
            raise InputError(f"unknown vector dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
        self.dim, self.dtype, self.settings, self.view = dim, dtype, settings, view
        self.index = Usearch(
            ndim=dim,
            metric="cos",
            dtype=DTYPES[dtype],
            connectivity=settings.connectivity,
            expansion_add=settings.expansion_add,
            expansion_search=settings.expansion_search,
        )
        if path is not None:
            if not path.is_file():
                raise ModelFormatError(f"{path}: vector file is missing")
            try:
                self.index.view(str(path)) if view else self.index.load(str(path))
            except (RuntimeError, ValueError) as exc:
                raise ModelFormatError(f"{path}: corrupt vector file ({exc})") from None
            if self.index.ndim != dim:
                raise ModelFormatError(f"{path}: vectors have {self.index.ndim} dims, the index says {dim}")

    def __len__(self) -> int:
        return len(self.index)

    def add(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        if len(keys):
            self.index.add(
                keys.astype(np.uint64),
                np.ascontiguousarray(vectors, dtype=np.float32),
                threads=self.settings.add_threads,
            )

    def remove(self, keys: list[int]) -> None:
        for key in keys:
            self.index.remove(int(key))

    def save(self, path: Path) -> None:
        """Write atomically: a temporary file beside ``path``, flushed, then renamed."""
        tmp = path.with_name(f".{path.name}.tmp")
        self.index.save(str(tmp))
        with tmp.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    def search(self, query: np.ndarray, k: int, *, exact: bool = False) -> list[tuple[int, float]]:
        """The ``k`` nearest keys with cosine similarity, best first."""
        size = len(self.index)
        if size == 0 or k < 1:
            return []
        exact = exact or size <= self.settings.exact_threshold
        found = self.index.search(query.astype(np.float32), min(k, size), exact=exact, threads=1)
        return [(int(key), 1.0 - float(dist)) for key, dist in zip(found.keys, found.distances, strict=True)]

    def search_among(self, query: np.ndarray, keys: list[int], k: int) -> list[tuple[int, float]]:
        """Exact search restricted to ``keys`` (a metadata filter's documents), in numpy."""
        best: list[tuple[int, float]] = []
        for start in range(0, len(keys), 65_536):
            chunk = np.asarray(keys[start : start + 65_536], dtype=np.uint64)
            rows = np.vstack(self.index.get(chunk, dtype="f32"))  # type: ignore[arg-type]
            norms = np.maximum(np.linalg.norm(rows, axis=1), np.finfo(np.float32).tiny)
            scores = rows @ query.astype(np.float32) / norms
            top = np.argpartition(-scores, min(k, len(scores)) - 1)[:k]
            best = sorted(best + [(int(chunk[i]), float(scores[i])) for i in top], key=lambda item: -item[1])[
                :k
            ]
        return best
