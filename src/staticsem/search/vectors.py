"""Dense vectors of an index: immutable segments plus a small buffer of recent writes.

A segment is one usearch graph file ``seg-N.usearch`` (cosine), or, up to ``exact_threshold`` vectors, a
flat ``seg-N.flat`` (safetensors keys + vectors, searched exactly: no graph to build), written once under
a temporary name, flushed and renamed before the store's commit names it; deleted keys are tombstones until a
merge drops them. Writes too small for a segment go to the store's ``buffer`` table and are searched
exactly. A ``Snapshot`` is one committed layout (segments, tombstones, buffer) that searches read without
locks. A graph is always built on one thread (usearch's concurrent ``add`` strands nodes no search reaches,
unum-cloud/USearch#735); a large write builds one segment per core, in parallel threads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.errors import InputError, ModelFormatError

DTYPES = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "int8": "i8"}
# bfloat16, usearch's own default: builds and searches about 20 % faster than float16 (500k Wikipedia
# sentences: 67 vs 84 s to build, 0.67 vs 0.86 ms at expansion 256) for 0.001–0.003 less recall@10.
DEFAULT_DTYPE = "bfloat16"


@dataclass(frozen=True)
class HnswSettings:
    """Graph settings, the segment and merge policy. ``expansion_search`` is 512, not usearch's 64:
    recall@10 against exact search falls with size, and the target is 0.98 (``benchmarks/search_scale.py``,
    1.5 M Wikipedia sentences in two graphs: 0.905 at 64, 0.977 at 320, 0.980 at 400, 0.983 at 512, where
    one query takes 2.0 ms with the graphs side by side). ``hybrid_expansion`` is 128: hybrid's dense list
    is a quarter of its fused score, and its top 10 there are 99.8 % those of the full breadth.
    ``expansion_add`` is 64, not 128: it halves the build for little recall (200k sentences in two graphs,
    at search expansion 320: 0.993 vs 0.996; at 128: 0.983 vs 0.991). ``exact_threshold`` is 8,192: an
    exact scan of 15,000 vectors costs 2-5 ms where a graph answers in 0.2 ms. Each graph is built on one
    thread (USearch#735); ``add_threads`` segments (0: one per core) are built side by side by a large
    write. Writes under ``flush_size`` vectors wait in the buffer (searched exactly) until it holds that
    many; segments of one size tier (``flush_size`` × ``merge_factor``^i) are merged ``merge_factor`` at a
    time up to ``merge_max`` vectors after a write, and into one segment per core by ``optimize``."""

    connectivity: int = 16
    expansion_add: int = 64
    expansion_search: int = 512
    hybrid_expansion: int = 128
    exact_threshold: int = 8192
    add_threads: int = 0
    flush_size: int = 2048
    merge_factor: int = 10
    merge_max: int = 100_000

    def __post_init__(self) -> None:
        if self.add_threads < 0:
            raise InputError(
                f"build threads (add_threads) must be 0 (every core) or more, got {self.add_threads}"
            )
        if min(self.expansion_search, self.hybrid_expansion) < 1:
            raise InputError("search expansions (expansion_search, hybrid_expansion) must be positive")
        if self.flush_size < 1 or self.merge_factor < 2 or self.merge_max < 0:
            raise InputError("flush_size must be >= 1, merge_factor >= 2 and merge_max >= 0")

    @property
    def builders(self) -> int:
        return self.add_threads or os.cpu_count() or 1


def _usearch(dim: int, dtype: str, settings: HnswSettings):  # type: ignore[no-untyped-def]
    from usearch.index import Index as Usearch

    if dtype not in DTYPES:
        raise InputError(f"unknown vector dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    return Usearch(
        ndim=dim,
        metric="cos",
        dtype=DTYPES[dtype],
        connectivity=settings.connectivity,
        expansion_add=settings.expansion_add,
        expansion_search=settings.expansion_search,
    )


def segment_file(folder: Path, name: str, graph: bool) -> Path:
    """A graph segment is a usearch file; a flat one (at most ``exact_threshold`` vectors) safetensors."""
    return folder / f"{name}.usearch" if graph else folder / f"{name}.flat"


def _write_synced(path: Path, write: Callable[[str], object]) -> None:
    """``write(temporary name)``, flush it to disk, rename it to ``path``."""
    tmp = path.with_name(f".{path.name}.tmp")
    write(str(tmp))
    with tmp.open("rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class Segment:
    """One saved segment with its sorted keys: a graph memory-mapped read-only, or flat vectors in memory.
    A segment of at most ``exact_threshold`` vectors is searched exactly (``brute``)."""

    def __init__(self, path: Path, name: str, dim: int, dtype: str, settings: HnswSettings) -> None:
        self.name, self.settings, self.index = name, settings, None
        self.path, self.dtype = path, dtype
        self._views: dict[int, Any] = {}  # the graph opened again at another search expansion
        self._views_lock = threading.Lock()
        if not path.is_file():
            raise ModelFormatError(f"{path}: vector segment is missing")
        from safetensors import SafetensorError

        try:
            if path.suffix == ".flat":
                from safetensors.numpy import load_file

                tensors = load_file(str(path))
                rows: np.ndarray | None = tensors["vectors"].astype(np.float32)
                self.keys = tensors["keys"]
            else:
                self.index = _usearch(dim, dtype, settings)
                self.index.view(str(path))
                self._graph(settings.hybrid_expansion)  # now, while the file is surely there
                self.keys = np.sort(np.asarray(self.index.keys, dtype=np.int64))
                rows = self.vectors(self.keys) if len(self.keys) <= settings.exact_threshold else None
        except (RuntimeError, ValueError, KeyError, OSError, SafetensorError) as exc:
            raise ModelFormatError(f"{path}: corrupt vector file ({exc})") from None
        if rows is not None and rows.shape[1:] != (dim,) or self.index is not None and self.index.ndim != dim:
            raise ModelFormatError(f"{path}: vectors of another width than the index's {dim} dims")
        flat = np.float32 if dtype == "float32" else np.float16
        self.matrix = None if rows is None else unit_rows(rows).astype(flat)

    def __len__(self) -> int:
        return len(self.keys)

    def holds(self, keys: np.ndarray) -> np.ndarray:
        at = np.searchsorted(self.keys, keys)
        return (at < len(self.keys)) & (self.keys[np.minimum(at, len(self.keys) - 1)] == keys)

    def vectors(self, keys: np.ndarray) -> np.ndarray:
        """The stored vectors of ``keys`` (all held here), as float32."""
        if self.index is None:
            assert self.matrix is not None
            return self.matrix[np.searchsorted(self.keys, keys)].astype(np.float32)
        if not len(keys):
            return np.empty((0, self.index.ndim), dtype=np.float32)
        return np.vstack(self.index.get(keys.astype(np.uint64), dtype="f32"))  # type: ignore[arg-type]

    def search(
        self, query: np.ndarray, k: int, exact: bool, expansion: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest keys and cosines; a graph searches ``expansion`` wide [the settings']."""
        if self.matrix is not None:
            return brute(self.matrix, self.keys, query, k)
        graph = self._graph(expansion)
        found = graph.search(query, min(k, len(self)), exact=exact, threads=1)
        return np.asarray(found.keys, dtype=np.int64), 1.0 - np.asarray(found.distances, dtype=np.float32)

    def _graph(self, expansion: int | None) -> Any:
        """The graph searching ``expansion`` wide: usearch keeps the breadth per index object, so another
        breadth is another read-only view of the same file (same pages), opened once (hybrid's when the
        segment opens: a merge may remove the file of a segment an older snapshot still searches)."""
        assert self.index is not None
        if expansion is None or expansion == self.settings.expansion_search:
            return self.index
        with self._views_lock:
            if expansion not in self._views:
                settings = replace(self.settings, expansion_search=expansion)
                view = _usearch(self.index.ndim, self.dtype, settings)
                view.view(str(self.path))
                self._views[expansion] = view
            return self._views[expansion]


def unit_rows(rows: np.ndarray) -> np.ndarray:
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def brute(rows: np.ndarray, keys: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` of unit ``rows`` by cosine to ``query``: usearch's SIMD scan on this thread (numpy's
    matrix-vector product hands off to BLAS threads, which wait a scheduler slice on a busy machine)."""
    if not len(keys) or k < 1:
        return keys[:0], np.empty(0, dtype=np.float32)
    from usearch.index import MetricKind
    from usearch.index import search as scan

    found = scan(rows, query.astype(rows.dtype), min(k, len(keys)), MetricKind.IP, exact=True, threads=1)
    return keys[np.asarray(found.keys, dtype=np.int64)], 1.0 - np.asarray(found.distances, dtype=np.float32)


class FlatBuilder:
    """One flat segment (no graph: it is searched exactly), for flushes and merges of few vectors."""

    graph = False

    def __init__(self, dtype: str) -> None:
        self.dtype = np.float32 if dtype == "float32" else np.float16
        self.keys: list[np.ndarray] = []
        self.rows: list[np.ndarray] = []
        self.strays: list[tuple[np.ndarray, np.ndarray]] = []  # a flat segment strands nothing

    def add(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        self.keys.append(np.asarray(keys, dtype=np.int64))
        self.rows.append(np.asarray(vectors, dtype=self.dtype))

    def finish(self) -> None:
        pass

    def __len__(self) -> int:
        return int(any(len(k) for k in self.keys))

    def save(self, paths: Sequence[Path]) -> list[int]:
        """Write the segment to ``paths[0]`` (nothing when it is empty); its size."""
        from safetensors.numpy import save_file

        if not len(self):
            return []
        keys = np.concatenate(self.keys)
        order = np.argsort(keys)
        tensors = {"keys": keys[order], "vectors": np.ascontiguousarray(np.vstack(self.rows)[order])}
        _write_synced(paths[0], lambda name: save_file(tensors, name))
        return [len(keys)]


class SegmentBuilder:
    """Builds graph segments from streamed vectors: batches go round-robin to ``threads`` graphs, each
    built on its own thread (one thread per graph: USearch#735); ``save`` writes each non-empty one."""

    graph = True

    def __init__(self, dim: int, dtype: str, settings: HnswSettings, threads: int = 1) -> None:
        self.graphs = [_usearch(dim, dtype, settings) for _ in range(max(1, threads))]
        self.pools = [ThreadPoolExecutor(1, thread_name_prefix="staticsem-hnsw") for _ in self.graphs]
        self.pending: list[list[Future[None]]] = [[] for _ in self.graphs]
        self.turn = 0
        self._lock = threading.Lock()
        self.strays: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        """Queue a batch: split evenly over the graphs, so they grow side by side."""
        rows = np.ascontiguousarray(vectors, dtype=np.float32)
        parts = min(len(self.graphs), len(keys))
        if not parts:  # a batch of documents without a known word
            return
        for part_keys, part_rows in zip(
            np.array_split(keys, parts), np.array_split(rows, parts), strict=True
        ):
            at, self.turn = self.turn, (self.turn + 1) % len(self.graphs)
            queue = self.pending[at]
            while len(queue) >= 4:  # bounded: the stream waits for the graphs instead of piling up copies
                queue.pop(0).result()
            task = self.graphs[at].add
            queue.append(self.pools[at].submit(task, part_keys.astype(np.uint64), part_rows, threads=1))

    def finish(self) -> None:
        try:
            for queue in self.pending:
                while queue:
                    queue.pop(0).result()
        finally:
            for pool in self.pools:
                pool.shutdown(wait=True, cancel_futures=True)

    def save(self, paths: Sequence[Path]) -> list[int]:
        """Write each non-empty graph to the next of ``paths`` (flushed and renamed); their sizes. The
        vectors a graph's search does not find are in ``strays`` for the caller to serve from a flat segment
        (and bury in the graph: taking them out of it would change the routes other searches take)."""
        self.finish()
        graphs = [g for g in self.graphs if len(g)]
        with ThreadPoolExecutor(len(graphs) or 1, thread_name_prefix="staticsem-hnsw") as pool:
            self.strays = list(pool.map(strays, graphs))
        sizes = []
        for graph, path in zip(graphs, paths, strict=False):
            _write_synced(path, graph.save)
            sizes.append(len(graph))
        return sizes

    def __len__(self) -> int:
        """How many segments ``save`` writes (waits for the queued batches)."""
        self.finish()
        return sum(1 for g in self.graphs if len(g))


# The checks ``strays`` runs: (expansion, k), cheapest first; a vector is rechecked only if the pass before
# missed it, and the last pass is what a search does (k = 10 at the search expansion). On 20,000 vectors
# of a 750k-vector graph of Wikipedia sentences: 10 % are missed at expansion 8, 1 % at 64, 15 at 320
# (15 of 20,000 too when all are checked at 320, at 15 times the cost).
STRAY_CHECKS = ((8, 1), (64, 1), (0, 10))
# A vector missed with only identical twins ahead (the same words) may rank behind more twins than that:
# it is asked for with these k (at the search expansion). HNSW strands many of a large group of twins (300
# identical vectors in a 400-vector graph at connectivity 16: a search for 300 found 112).
TWIN_CHECKS = (40, 160, 640)


def strays(graph, chunk: int = 16_384) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    """The keys (and vectors) of ``graph`` that a search for their own vector does not find, on this
    thread: HNSW leaves a few nodes that no search reaches (about 1 in 1,300 at 750k vectors); a write
    serves them from a flat segment. A vector with identical twins is looked for among up to 640 of them."""
    expansion, keys = graph.expansion_search, np.asarray(graph.keys, dtype=np.uint64)
    lost: list[np.ndarray] = [np.empty(0, dtype=np.uint64)]
    lost_rows: list[np.ndarray] = [np.empty((0, graph.ndim), dtype=np.float32)]
    try:
        for start in range(0, len(keys), chunk):
            suspects = keys[start : start + chunk]
            rows = np.vstack(graph.get(suspects, dtype="f32"))
            twins = np.zeros(len(suspects), dtype=bool)
            for ef, k in STRAY_CHECKS:
                graph.expansion_search = ef or expansion
                suspects, rows, twins = _unfound(graph, suspects, rows, min(k, len(keys)))
            for k in TWIN_CHECKS:  # a vector a non-twin outranked is lost; one behind twins is asked again
                lost.append(suspects[~twins])
                lost_rows.append(rows[~twins])
                suspects, rows, twins = _unfound(graph, suspects[twins], rows[twins], min(k, len(keys)))
            lost.append(suspects)
            lost_rows.append(rows)
    finally:
        graph.expansion_search = expansion
    return np.concatenate(lost).astype(np.int64), np.vstack(lost_rows)


def _unfound(graph, suspects: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, ...]:  # type: ignore[no-untyped-def]
    """The ``suspects`` a search for their own vector (``rows``) misses, their rows, and whether all of each
    one's hits were identical twins of it."""
    if not len(suspects):
        return suspects, rows, np.zeros(0, dtype=bool)
    found = graph.search(rows, k, threads=1)
    hits = np.asarray(found.keys).reshape(len(rows), -1)
    twins = np.all(np.asarray(found.distances).reshape(len(rows), -1) < 1e-3, axis=1)
    miss = ~(hits == suspects[:, None]).any(axis=1)
    return suspects[miss], rows[miss], twins[miss]


def plan_merge(sizes: dict[str, tuple[int, int]], settings: HnswSettings) -> list[str]:
    """Segments to merge now (size-tiered, as Lucene's policy): those without a live vector, all at once
    (the merge drops them), else ``merge_factor`` segments of one tier, or one whose share of deleted
    vectors is over a third; never more than ``merge_max`` live vectors."""
    empty = [name for name, (count, dead) in sizes.items() if dead >= count]
    if empty:
        return empty
    tiers: dict[int, list[tuple[int, str]]] = {}
    for name, (count, dead) in sizes.items():
        live = count - dead
        if count and dead * 3 > count and live <= settings.merge_max:
            return [name]
        tier = int(
            np.log(max(live, settings.flush_size) / settings.flush_size) / np.log(settings.merge_factor)
        )
        tiers.setdefault(tier, []).append((live, name))
    for tier in sorted(tiers):
        members = sorted(tiers[tier])[: settings.merge_factor]
        if len(members) >= settings.merge_factor and sum(live for live, _ in members) <= settings.merge_max:
            return [name for _, name in members]
    return []


def plan_optimize(sizes: dict[str, tuple[int, int]], buffered: int) -> list[str]:
    """What ``optimize`` merges: every segment and the ``buffer`` (when it holds vectors), unless that is
    already done (no buffered vector, at most one segment, no deleted vector)."""
    if not buffered and len(sizes) <= 1 and not any(dead for _, dead in sizes.values()):
        return []
    return [*sizes, *(["buffer"] if buffered else [])]
