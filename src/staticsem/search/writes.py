"""How an index changes: one write is one store transaction around lexical and vector work.

Under the index's write lock (a thread lock and ``.write.lock``, so other processes wait):

1. the lexical engine catches up with the store if a crash left it behind (its redo log: documents above
   ``lexical_key`` and ``lexical_deletes``);
2. ``BEGIN``; rows, filter terms and tombstones go into the store; texts into the lexical writer
   (uncommitted); vectors into new segment files (written, flushed, renamed) or the store's buffer;
3. ``COMMIT`` of the store: **the commit point**. A kill before it leaves the previous state (new segment
   files unnamed by the store are removed later); a kill after it leaves the new state, and step 1 of the
   next write replays what the lexical engine missed;
4. the lexical commit, then ``lexical_key`` is recorded.

A write adds or deletes what it touches: nothing is rewritten in proportion to the index. Merges are writes
too: segments are read, rebuilt into one, swapped in one commit, and the old files removed.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from staticsem.errors import InputError
from staticsem.search.documents import Document
from staticsem.search.lexical import LexicalWriter
from staticsem.search.snapshot import Snapshot
from staticsem.search.store import DocStore, metadata_terms
from staticsem.search.vectors import (
    FlatBuilder,
    HnswSettings,
    SegmentBuilder,
    plan_merge,
    plan_optimize,
    segment_file,
)

if TYPE_CHECKING:
    from staticsem.model import StaticModel
    from staticsem.search.lexical import LexicalIndex
    from staticsem.search.store import DocStore
    from staticsem.search.vectors import HnswSettings, Segment


class Index(Protocol):
    """What a write needs of the index it changes (``staticsem.search.index.Index``)."""

    path: Path
    model: StaticModel
    dtype: str
    hnsw: HnswSettings
    store: DocStore
    lexical: LexicalIndex

    def open_segment(self, name: str, path: Path) -> Segment: ...


LOCK_FILE = ".write.lock"


@contextlib.contextmanager
def file_lock(folder: Path) -> Iterator[None]:
    """An exclusive lock on the index folder's lock file (other processes block until it is released)."""
    with (folder / LOCK_FILE).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass
class Write:
    """What one write transaction has done so far (before its commit)."""

    index: Index
    lexical: LexicalWriter
    first_key: int
    keys: list[np.ndarray] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)
    deleted: set[int] = field(default_factory=set)
    added: int = 0
    removed: int = 0
    builder: SegmentBuilder | FlatBuilder | None = None
    files: list[Path] = field(default_factory=list)

    @property
    def pending(self) -> int:
        return sum(len(k) for k in self.keys)

    def add_vectors(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        """Vectors of new documents: held until the write is large enough for its own segments."""
        settings = self.index.hnsw
        if self.builder is None:
            self.keys.append(keys)
            self.vectors.append(vectors)
            if self.pending <= settings.exact_threshold:  # not (yet) worth a graph
                return
            self.builder = SegmentBuilder(self.index.model.dim, self.index.dtype, settings, settings.builders)
            keys, vectors = np.concatenate(self.keys), np.vstack(self.vectors)
            self.keys, self.vectors = [], []
        self.builder.add(keys, vectors)

    def remove(self, found: list[tuple[int, int]], snapshot: Snapshot) -> None:
        """Delete documents ``[(key, zero)]``: rows now, vectors by tombstone (or not added at all)."""
        store = self.index.store
        keys = [key for key, _ in found]
        store.delete(keys)
        self.removed += len(keys)
        self.lexical.delete(keys)
        vectors = np.asarray([key for key, zero in found if not zero], dtype=np.int64)
        vectors = vectors[~np.isin(vectors, snapshot.buffer_keys)]  # buffered rows went with the document
        pending = vectors >= self.first_key  # added by this write: left out of its segments or buffer
        self.deleted.update(vectors[pending].tolist())
        store.bury(held_by(vectors[~pending], snapshot.segments))

    def add_documents(self, docs: list[Document], upsert: bool, snapshot: Snapshot) -> int:
        """New documents (``upsert``: in place of those with the same id): rows and filter terms, texts into
        the lexical writer, vectors held for ``finish_vectors``. :returns: how many were added or replaced
        (a document an earlier batch of this write added is not counted again)."""
        store = self.index.store
        given = [d.id for d in docs if d.id is not None]
        existing, again = store.keys_of(given), 0
        if not upsert:
            seen: set[str] = set()
            for doc_id, where in ((d.id, d.where) for d in docs if d.id is not None):
                if doc_id in existing or doc_id in seen:
                    raise InputError(
                        f"{where + ': ' if where else ''}duplicate document id {doc_id!r}; "
                        "pass upsert (--upsert) to replace it"
                    )
                seen.add(doc_id)
        else:
            replaced = [existing[i] for i in dict.fromkeys(given) if i in existing]
            self.remove(replaced, snapshot)
            again = sum(key >= self.first_key for key, _ in replaced)  # counted by an earlier batch
            last = {d.id: n for n, d in enumerate(docs) if d.id is not None}
            docs = [d for n, d in enumerate(docs) if d.id is None or last[d.id] == n]
        vectors = self.index.model.encode_document([d.text for d in docs], normalize=True)
        zero = ~np.any(vectors, axis=1)
        first = store.next_key()
        keys = np.arange(first, first + len(docs), dtype=np.int64)
        rows = [
            (int(k), d.id or str(k), d.text, d.metadata, bool(z))
            for k, d, z in zip(keys, docs, zero, strict=True)
        ]
        try:
            store.insert(rows)
        except Exception as exc:  # an assigned id equal to a given one
            if "UNIQUE" not in str(exc):
                raise
            raise InputError(f"duplicate document id ({exc}); give every document an id") from None
        for key, _, text, metadata, _ in rows:
            self.lexical.add(key, text, metadata_terms(metadata))
        self.added += len(rows)
        self.add_vectors(keys[~zero], vectors[~zero])
        return len(docs) - again

    def finish_vectors(self) -> None:
        """Write the new vectors: to the buffer when small, else to new segments (buffer included)."""
        store, settings = self.index.store, self.index.hnsw
        if self.builder is None:
            keys = np.concatenate(self.keys) if self.keys else np.empty(0, dtype=np.int64)
            vectors = np.vstack(self.vectors) if self.vectors else np.empty((0, self.index.model.dim))
            live = ~np.isin(keys, list(self.deleted))
            keys, vectors = keys[live], vectors[live]
            buffered = store.w.execute("SELECT COUNT(*) FROM buffer").fetchone()[0]
            if buffered + len(keys) < settings.flush_size:
                store.buffer_add(keys, vectors)
                return
            old_keys, old_vectors = store.take_buffer()
            if len(old_keys):
                keys, vectors = np.concatenate([old_keys, keys]), np.vstack([old_vectors, vectors])
            self.builder = new_builder(self.index, len(keys), 1)
            self.builder.add(keys, vectors)
        self.save_segments(self.builder, [])

    def save_segments(self, builder: SegmentBuilder | FlatBuilder, replaced: list[str]) -> None:
        """Write ``builder``'s segments in place of ``replaced``; the vectors a graph strands (``strays``)
        are buried in it and served by one more, flat segment."""
        store = self.index.store
        names = [f"seg-{store.next_segment()}" for _ in range(len(builder))]
        paths = [segment_file(self.index.path, name, builder.graph) for name in names]
        self.files += paths
        sizes = builder.save(paths)
        added = [(n, s, builder.graph) for n, s in zip(names, sizes, strict=True)]
        lost = [pair for pair in builder.strays if len(pair[0])]
        stranded = [
            (int(key), name) for name, (keys, _) in zip(names, builder.strays, strict=False) for key in keys
        ]
        if lost:
            flat = FlatBuilder(self.index.dtype)
            for keys, rows in lost:
                flat.add(keys, rows)
            names.append(f"seg-{store.next_segment()}")
            paths.append(segment_file(self.index.path, names[-1], False))
            self.files.append(paths[-1])
            added.append((names[-1], flat.save(paths[-1:])[0], False))
        store.replace_segments(replaced, added)
        store.bury(stranded)
        if self.deleted:  # documents added and deleted (upserted) within this write
            keys = np.asarray(sorted(self.deleted), dtype=np.int64)
            segments = [self.index.open_segment(name, path) for name, path in zip(names, paths, strict=True)]
            store.bury(held_by(keys, segments))


def held_by(keys: np.ndarray, segments: Sequence[Segment]) -> list[tuple[int, str]]:
    """``(key, segment name)`` for each of ``keys`` that one of ``segments`` holds."""
    return [(int(key), s.name) for s in segments for key in keys[s.holds(keys)]]


def new_builder(index: Index, size: int, threads: int) -> SegmentBuilder | FlatBuilder:
    """A flat segment for up to ``exact_threshold`` vectors (searched exactly anyway), else graphs."""
    if size <= index.hnsw.exact_threshold:
        return FlatBuilder(index.dtype)
    return SegmentBuilder(index.model.dim, index.dtype, index.hnsw, threads)


def clean_stale_files(folder: Path, store: DocStore) -> None:
    """Remove segment files no commit names (a write killed before its commit); under the write lock."""
    keep = {segment_file(folder, name, graph).name for name, _, graph in store.segments()}
    for stale in [*folder.glob("seg-*"), *folder.glob(".seg-*.tmp")]:
        if stale.name not in keep:
            stale.unlink(missing_ok=True)


def catch_up_lexical(index: Index, writer: LexicalWriter) -> None:
    """Replay into the lexical engine what the store committed and it did not (after a crash)."""
    store = index.store
    lexical_key, last, deletes = store.lexical_pending()
    if lexical_key == last and not deletes:  # tantivy commits after the store: it is never ahead
        return
    writer.delete_above(lexical_key)
    writer.delete(deletes)
    for rows in store.iter_docs(after=lexical_key):
        for key, _, text, metadata in rows:
            writer.add(key, text, metadata_terms(_json(metadata)))
    writer.commit()
    store.lexical_done(last)


def _json(text: str) -> dict:
    import json

    return json.loads(text)


def merge_plan(snapshot: Snapshot, settings: HnswSettings, optimize: bool) -> list[str]:
    """The segments (and ``buffer``) to merge now: by the size-tiered policy, or all for ``optimize``."""
    sizes = {s.name: (len(s), len(snapshot.dead.get(s.name, ()))) for s in snapshot.segments}
    return plan_optimize(sizes, len(snapshot.buffer_keys)) if optimize else plan_merge(sizes, settings)


def merge_segments(index: Index, write: Write, names: list[str], snapshot: Snapshot, threads: int) -> None:
    """Rebuild ``names`` (and, for ``optimize``, the buffer) without their deleted vectors; segments without
    a live vector are dropped, nothing rebuilt."""
    settings = index.hnsw
    merged = [s for s in snapshot.segments if s.name in names]
    size = sum(len(s) - len(snapshot.dead.get(s.name, ())) for s in merged)
    size += len(snapshot.buffer_keys) if "buffer" in names else 0
    if not size:
        index.store.replace_segments([s.name for s in merged], [])
        return
    builder = new_builder(index, size, threads)
    for segment in merged:
        dead = snapshot.dead.get(segment.name, np.empty(0, dtype=np.int64))
        live = segment.keys[~np.isin(segment.keys, dead)]
        for start in range(0, len(live), settings.flush_size * 4):
            chunk = live[start : start + settings.flush_size * 4]
            builder.add(chunk, segment.vectors(chunk))
    if "buffer" in names:
        keys, vectors = index.store.take_buffer()
        builder.add(keys, vectors)
    write.save_segments(builder, [name for name in names if name != "buffer"])
