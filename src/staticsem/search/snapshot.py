"""A ``Snapshot``: one committed layout of an index's dense side (segments, tombstones, buffer), read by
searches without locks and never changed once built.

A search asks every segment for its ``k`` best live vectors and keeps the best ``k`` of all. Given a
thread pool, the graph segments are searched side by side (the first on the calling thread), as Lucene
searches segments concurrently: a large write leaves one graph per core, and one query then takes about
as long as one graph's search instead of the sum. usearch releases the GIL while it searches.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np

from staticsem.search.vectors import Segment, brute, unit_rows


@dataclass
class Snapshot:
    """One committed layout of the dense side: what a search reads, never changed once built."""

    generation: int
    layout: int
    segments: list[Segment] = field(default_factory=list)
    dead: dict[str, np.ndarray] = field(default_factory=dict)
    buffer_keys: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    buffer: np.ndarray = field(default_factory=lambda: np.empty((0, 0), dtype=np.float32))

    def __len__(self) -> int:
        return sum(len(s) - len(self.dead.get(s.name, ())) for s in self.segments) + len(self.buffer_keys)

    def search(
        self,
        query: np.ndarray,
        k: int,
        *,
        exact: bool = False,
        expansion: int | None = None,
        pool: Executor | None = None,
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest live keys with cosine similarity, best first. ``expansion``: the graphs' search
        breadth for this search [the index's]; ``pool``: search the graph segments side by side in it."""
        query = np.ascontiguousarray(query, dtype=np.float32)

        def top(segment: Segment) -> tuple[np.ndarray, np.ndarray]:
            return _live_top(segment, self.dead.get(segment.name), query, k, exact, expansion)

        graphs = [s for s in self.segments if s.index is not None]
        aside = graphs[1:] if pool is not None else []
        futures = [pool.submit(top, s) for s in aside] if pool is not None else []
        parts = [self._buffer_scores(query, self.buffer_keys, self.buffer)]
        parts += [top(s) for s in self.segments if s not in aside]
        parts += [future.result() for future in futures]
        return _top(parts, k)

    def search_among(self, query: np.ndarray, allowed: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Exact search restricted to the sorted keys ``allowed`` (a metadata filter's documents); a vector a
        segment holds under a tombstone (a graph's stray, served by a flat segment) is left out there."""
        query = np.ascontiguousarray(query, dtype=np.float32)
        inside = np.isin(self.buffer_keys, allowed)
        parts = [self._buffer_scores(query, self.buffer_keys[inside], self.buffer[inside])]
        for segment in self.segments:
            keys = allowed[segment.holds(allowed)]
            if segment.name in self.dead:
                keys = keys[~np.isin(keys, self.dead[segment.name])]
            for start in range(0, len(keys), 65_536):
                chunk = keys[start : start + 65_536]
                parts.append(brute(unit_rows(segment.vectors(chunk)), chunk, query, k))
        return _top(parts, k)

    def search_filtered(
        self,
        query: np.ndarray,
        allowed: np.ndarray,
        k: int,
        *,
        expansion: int | None = None,
        pool: Executor | None = None,
    ) -> list[tuple[int, float]]:
        """Search restricted to the sorted keys ``allowed`` through the graphs, over-fetching until ``k`` of
        them come back (exact over ``allowed`` when even a search of everything falls short)."""
        total = len(self)
        fetch = k * max(2, 2 * total // max(len(allowed), 1))
        while fetch < total:
            found = self.search(query, fetch, expansion=expansion, pool=pool)
            keep = np.isin([key for key, _ in found], allowed)
            hits = [hit for hit, kept in zip(found, keep, strict=True) if kept]
            if len(hits) >= k:
                return hits[:k]
            fetch *= 4
        return self.search_among(query, allowed, k)

    @staticmethod
    def _buffer_scores(
        query: np.ndarray, keys: np.ndarray, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        return brute(rows, keys, query, len(keys))


def _live_top(
    segment: Segment,
    dead: np.ndarray | None,
    query: np.ndarray,
    k: int,
    exact: bool,
    expansion: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """A segment's ``k`` best keys that are not tombstoned: it over-fetches by ``k`` and asks again for
    four times more while tombstones leave fewer than ``k`` (not by every tombstone: a graph's few
    hundred buried strays would make every search ask for hundreds of results)."""
    if dead is None or not len(dead):
        return segment.search(query, k, exact, expansion)
    want = k
    while True:
        asked = min(len(segment), want + min(len(dead), want))
        keys, scores = segment.search(query, asked, exact, expansion)
        live = ~np.isin(keys, dead)
        if live.sum() >= k or asked >= len(segment):
            return keys[live][:k], scores[live][:k]
        want *= 4


def _top(parts: Sequence[tuple[np.ndarray, np.ndarray]], k: int) -> list[tuple[int, float]]:
    keys = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, dtype=np.int64)
    scores = np.concatenate([p[1] for p in parts]).astype(np.float64) if parts else np.empty(0)
    order = np.lexsort((keys, -scores))[:k]  # best first; ties by key
    return [(int(keys[i]), float(scores[i])) for i in order]
