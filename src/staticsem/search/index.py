"""``Index``: a persistent search index over documents, dense (static model) + BM25 (tantivy).

An index folder holds ``config.json`` (format version, the model's path and SHA-256, settings),
``docs.sqlite`` (the single source of truth: documents, ids, metadata, filter terms, the vector layout,
tombstones; ``staticsem.search.store``), ``lexical/`` (tantivy's segments; ``staticsem.search.lexical``) and
``seg-N.usearch`` vector segments (``staticsem.search.vectors``). How writes commit and survive a kill:
``staticsem.search.writes``. ``build`` fills a temporary folder and renames it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.errors import InputError, ModelFormatError, parse_choice
from staticsem.io.atomic import atomic_folder
from staticsem.model import StaticModel
from staticsem.search import writes
from staticsem.search.common import Hit, SearchMode, batches, progress, require_engines, resolve_model
from staticsem.search.config import (
    BM25_COMMON_DF,
    CONFIG,
    DATABASE,
    LEXICAL,
    describe,
    new_config,
    read_config,
    recorded_model,
)
from staticsem.search.documents import Document
from staticsem.search.fusion import FusionSettings, fuse
from staticsem.search.lexical import LexicalIndex
from staticsem.search.snapshot import Snapshot
from staticsem.search.store import DocStore, Row, where_terms
from staticsem.search.vectors import DEFAULT_DTYPE, HnswSettings, Segment
from staticsem.search.vectors import segment_file as _segment_file

logger = logging.getLogger(__name__)


class Index:
    """Open with ``Index.open``, create with ``Index.build``; see the module docstring for the files."""

    def __init__(self, path: Path, model: StaticModel, config: dict[str, Any], *, read_only: bool) -> None:
        self.path, self.model, self.config, self.read_only = path, model, config, read_only
        vectors = config["vectors"]
        self.dtype: str = vectors["dtype"]
        self.hnsw = HnswSettings(**{k: v for k, v in vectors.items() if k != "dtype"})
        self.fusion = FusionSettings(**config["fusion"])
        self.bm25_common_df = float(config.get("bm25", {}).get("common_df", BM25_COMMON_DF))
        self.store = DocStore(path / DATABASE, read_only=read_only)
        self.lexical = LexicalIndex(path / LEXICAL)
        self._lock = threading.RLock()  # writes
        self._refresh_lock = threading.Lock()
        self._lexical_seen = -1
        self._segments: dict[str, Segment] = {}
        self.snapshot = Snapshot(-1, -1)
        self._burials = -1
        self.query_threads = os.cpu_count() or 1  # threads one search may use (1: the calling thread only)
        # what one search hands work to: hybrid's dense side (legs) and graph segments, which never wait on
        # a pool themselves (threads start on first use)
        self._pools = {
            name: ThreadPoolExecutor(max(2, self.query_threads), f"staticsem-{name}")
            for name in ("legs", "segments")
        }
        if not read_only:
            self._catch_up()
        self._refresh()

    # ------------------------------------------------------------------ creating and opening
    @classmethod
    def build(
        cls,
        model: StaticModel | str | Path,
        documents: Iterable[str | dict[str, Any] | Document],
        path: str | Path,
        *,
        dtype: str = DEFAULT_DTYPE,
        hnsw: HnswSettings | None = None,
        fusion: FusionSettings | None = None,
        bm25_common_df: float = BM25_COMMON_DF,
        upsert: bool = False,
        batch_size: int = 4096,
        show_progress: bool = False,
    ) -> Index:
        """Index ``documents`` into a new folder ``path`` (an existing index there is replaced on success)."""
        require_engines()  # MissingExtra without the search extra
        static, model_path = resolve_model(model)
        hnsw = hnsw or HnswSettings()
        config = new_config(static, model_path, dtype, hnsw, fusion or FusionSettings(), bm25_common_df)
        path = Path(path)
        with atomic_folder(path, markers=(CONFIG, DATABASE), what="index") as tmp:
            (tmp / CONFIG).write_text(json.dumps(config, indent=2), encoding="utf-8")
            DocStore(tmp / DATABASE, create=True).close()
            LexicalIndex(tmp / LEXICAL, create=True)
            with cls(tmp, static, config, read_only=False) as index:
                index.add(documents, upsert=upsert, batch_size=batch_size, show_progress=show_progress)
        return cls(path, static, config, read_only=False)

    @classmethod
    def open(
        cls, path: str | Path, model: StaticModel | str | Path | None = None, *, read_only: bool = False
    ) -> Index:
        """Open an index; the model defaults to the one recorded in its ``config.json``.

        :raises InputError: when the model's weights differ from the ones the index was built with.
        :raises ModelFormatError: for a missing or corrupt index file, or an index of an older format.
        :raises MissingExtra: without the ``search`` extra (usearch, tantivy).
        """
        require_engines()
        path = Path(path)
        config = read_config(path)
        static = recorded_model(path, config, model)
        return cls(path, static, config, read_only=read_only)

    def close(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=False)
        self.store.close()

    def _pool(self, name: str) -> ThreadPoolExecutor | None:
        """The pool ``name`` (``legs`` or ``segments``), or None when a search keeps to its own thread."""
        return self._pools[name] if self.query_threads > 1 else None

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.store.documents()

    @property
    def generation(self) -> int:
        return self.snapshot.generation

    # ------------------------------------------------------------------ the committed state
    def open_segment(self, name: str, path: Path) -> Segment:
        if name not in self._segments:
            self._segments[name] = Segment(path, name, self.model.dim, self.dtype, self.hnsw)
        return self._segments[name]

    def _refresh(self) -> Snapshot:
        """The snapshot of the last commit, re-read (in one read transaction) only when a write committed;
        the lexical searcher is reloaded when tantivy committed. Searches never wait for a write. A segment
        file missing from the layout read was removed by another process's later merge: read again."""
        state = self.store.state()
        if state["lexical_generation"] != self._lexical_seen:
            self.lexical.reload()
            self._lexical_seen = state["lexical_generation"]
        if state["generation"] == self.snapshot.generation:
            return self.snapshot
        with self._refresh_lock:
            while True:
                current, reader = self.snapshot, self.store.reader
                reader.execute("BEGIN")
                try:
                    state = self.store.state()
                    if state["generation"] != current.generation:
                        self.snapshot = self._read_snapshot(state, current)
                    return self.snapshot
                except ModelFormatError as exc:  # a segment file of that layout is gone
                    error = exc
                finally:
                    reader.execute("COMMIT")
                if self.store.state()["layout"] == state["layout"]:  # not merged away by a newer commit
                    raise error

    def _read_snapshot(self, state: dict[str, int], current: Snapshot) -> Snapshot:
        if state["layout"] != current.layout:
            rows = self.store.segments()
            segments = [self.open_segment(n, _segment_file(self.path, n, graph)) for n, _, graph in rows]
            self._segments = {s.name: s for s in segments}
        else:
            segments = current.segments
        same = state["layout"] == current.layout and state["burials"] == self._burials
        dead, self._burials = (current.dead if same else self.store.tombstones()), state["burials"]
        known = dict(zip(current.buffer_keys.tolist(), current.buffer, strict=True))
        keys, blobs = self.store.buffer(set(known))
        vectors: list[np.ndarray] = [
            known[k] if b is None else np.frombuffer(b, dtype=np.float32)
            for k, b in zip(keys, blobs, strict=True)
        ]
        buffer = np.vstack(vectors) if vectors else np.empty((0, self.model.dim), dtype=np.float32)
        return Snapshot(state["generation"], state["layout"], segments, dead, keys, buffer)

    @contextlib.contextmanager
    def _write(self, threads: int = 1) -> Iterator[writes.Write]:
        """One write: catch the lexical side up, then one store transaction; see ``writes``. ``threads``:
        the lexical writer's (0: every core, for large writes)."""
        if self.read_only:
            raise InputError(f"{self.path} is open read-only")
        with self._lock, writes.file_lock(self.path):
            writes.clean_stale_files(self.path, self.store)
            lexical = self.lexical.writer(threads)
            try:
                writes.catch_up_lexical(self, lexical)
                self.store.w.execute("BEGIN IMMEDIATE")
                write = writes.Write(self, lexical, self.store.next_key())
                try:
                    self._refresh()
                    yield write
                    self.store.finish_commit(write.added, write.removed)
                    self.store.w.execute("COMMIT")
                except BaseException:
                    self.store.w.execute("ROLLBACK")
                    if write.builder is not None:
                        write.builder.finish()
                    for file in write.files:
                        file.unlink(missing_ok=True)
                    raise
                lexical.commit()
                self.store.lexical_done(self.store.next_key() - 1)
            finally:
                lexical.close()
            old = set(self._segments)
            self._refresh()
            for name in old - set(self._segments):
                for graph in (True, False):
                    _segment_file(self.path, name, graph).unlink(missing_ok=True)

    def _catch_up(self) -> None:
        """Let the lexical engine replay what a killed write committed to the store only."""
        with self._lock, writes.file_lock(self.path):
            lexical = self.lexical.writer()
            try:
                writes.catch_up_lexical(self, lexical)
            finally:
                lexical.close()

    # ------------------------------------------------------------------ changing
    def add(
        self,
        documents: Iterable[str | dict[str, Any] | Document],
        *,
        upsert: bool = False,
        batch_size: int = 4096,
        show_progress: bool = False,
    ) -> int:
        """Add documents (streamed in batches); a duplicate id is an error unless ``upsert`` replaces it.

        :returns: how many documents were added or replaced. On any error nothing changes.
        """
        if batch_size < 1:
            raise InputError(f"batch_size must be positive, got {batch_size}")
        small = isinstance(documents, (list, tuple)) and len(documents) < batch_size
        with self._write(1 if small else 0) as write, progress(show_progress) as advance:
            added = 0
            for batch in batches(documents, batch_size):
                added += write.add_documents([Document.coerce(item) for item in batch], upsert, self.snapshot)
                advance(len(batch))
            write.finish_vectors()
        self._merge_after_write()
        return added

    def delete(self, ids: Iterable[str]) -> int:
        """Delete documents by id.

        :raises InputError: naming ids that are not in the index (then none is deleted).
        """
        ids = list(dict.fromkeys(str(i) for i in ids))
        with self._write() as write:
            found = self.store.keys_of(ids)
            missing = [i for i in ids if i not in found]
            if missing:
                raise InputError(f"no document with id {', '.join(map(repr, missing[:5]))} in {self.path}")
            write.remove(list(found.values()), self.snapshot)
        self._merge_after_write()
        return len(ids)

    def _merge_after_write(self) -> None:
        """The size-tiered merge after a committed write. The write stands whatever happens here, so a failure
        is logged, not raised (the next write's merge tries again)."""
        try:
            self.merge()
        except Exception:
            logger.exception("%s: the merge after a write failed (the write is saved)", self.path)

    def merge(self, *, optimize: bool = False) -> int:
        """Merge segments: by the size-tiered policy (after every write), or everything into one segment per
        core without deleted vectors (``optimize``). :returns: how many segments were merged.

        :raises RuntimeError: when a merge leaves a segment it merged in place (no progress: no endless loop).
        """
        if self.read_only:
            raise InputError(f"{self.path} is open read-only")
        merged = 0
        while names := writes.merge_plan(self._refresh(), self.hnsw, optimize):
            with self._write() as write:
                threads = self.hnsw.builders if optimize else 1
                writes.merge_segments(self, write, names, self.snapshot, threads)
            # segment names are never reused: one still there was not merged, and planning again would
            # plan it again, for ever
            stuck = sorted(set(names) & {segment.name for segment in self.snapshot.segments})
            if stuck:
                raise RuntimeError(f"{self.path}: merging left {', '.join(stuck)} in place; merges stop here")
            merged += len(names)
            if optimize:
                break
        return merged

    # ------------------------------------------------------------------ searching
    def search(
        self,
        query: str,
        k: int = 10,
        *,
        mode: SearchMode | str = SearchMode.HYBRID,
        where: dict[str, Any] | None = None,
        exact: bool = False,
        fusion: FusionSettings | None = None,
    ) -> list[Hit]:
        """The ``k`` best documents for ``query``; ``where`` keeps documents whose metadata fields equal
        the given values (strings as they are, numbers and booleans as JSON, any element of a list)."""
        mode = parse_choice(SearchMode, mode, "search mode")
        if not isinstance(query, str):
            raise InputError(f"the query must be a string, got {type(query).__name__}")
        if k < 1:
            raise InputError(f"k must be positive, got {k}")
        fusion = fusion or self.fusion
        terms = where_terms(where)
        snapshot = self._refresh()
        if mode is SearchMode.BM25:
            return self._hits(self._bm25(query, k, terms), k)
        vector = self.model.encode_query(query, normalize=True)
        if mode is SearchMode.DENSE:
            return self._hits(self.dense(snapshot, vector, k, where, exact), k)
        # hybrid: the dense side (at the graphs' hybrid breadth: its list is a quarter of the fused score)
        # runs beside BM25 when a pool is there
        depth, expansion = max(k, fusion.depth), None if exact else self.hnsw.hybrid_expansion
        legs = self._pool("legs")
        if legs is None:
            dense = self.dense(snapshot, vector, depth, where, exact, expansion)
            lexical = self._bm25(query, depth, terms)
        else:
            side = legs.submit(self.dense, snapshot, vector, depth, where, exact, expansion)
            lexical = self._bm25(query, depth, terms)
            dense = side.result()
        weights = [fusion.dense_weight, fusion.bm25_weight]
        return self._hits(fuse([dense, lexical], weights, fusion), k)

    def _bm25(self, query: str, k: int, terms: list[str]) -> list[tuple[int, float]]:
        return self.lexical.search(query, k, terms, self.bm25_common_df)

    def _hits(self, ranked: list[tuple[int, float]], k: int) -> list[Hit]:
        rows = self.store.rows([key for key, _ in ranked[: k + 8]])  # a key whose row is gone is left out
        return [_hit(rows[key], score) for key, score in ranked if key in rows][:k]

    def dense(
        self,
        snapshot: Snapshot,
        query: np.ndarray,
        k: int,
        where: dict[str, Any] | None,
        exact: bool,
        expansion: int | None = None,
    ) -> list[tuple[int, float]]:
        """Nearest keys by cosine; filtered: the graphs with growing over-fetch, or exact over the matches.
        ``expansion``: the graphs' search breadth [``hnsw.expansion_search``]."""
        if not np.any(query):
            return []
        pool = self._pool("segments")
        if not where:
            return snapshot.search(query, k, exact=exact, expansion=expansion, pool=pool)
        allowed = self.store.keys_where(where)
        if exact or len(allowed) <= self.hnsw.exact_threshold:
            return snapshot.search_among(query, allowed, k)
        return snapshot.search_filtered(query, allowed, k, expansion=expansion, pool=pool)

    # ------------------------------------------------------------------ describing
    def info(self) -> dict[str, Any]:
        """What the index holds and how it was built (JSON-serialisable)."""
        return describe(self, self._refresh())


def _hit(row: Row, score: float) -> Hit:
    key, doc_id, text, metadata = row
    return Hit(doc_id, float(score), text, json.loads(metadata))
