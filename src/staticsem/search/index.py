"""``Index``: a persistent search index over documents, dense (static model) + BM25 (SQLite FTS5).

An index folder holds ``config.json`` (the model's path and SHA-256, settings), ``docs.sqlite`` (documents,
ids, metadata, the FTS5 table, the current vector generation) and ``vectors-GEN.usearch``. Every change
(``add``, ``delete``) runs in one SQLite transaction: the new vector file is written under the next
generation's name, then the transaction commits that generation, then the old file goes. A failure or a
kill at any point leaves the previous state readable; ``build`` fills a temporary folder and renames it.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.errors import InputError, ModelFormatError, parse_choice
from staticsem.io.atomic import atomic_folder
from staticsem.model import StaticModel
from staticsem.search.common import Hit, SearchMode, batches, model_sha256, progress, resolve_model
from staticsem.search.documents import Document
from staticsem.search.fusion import FusionSettings, fuse
from staticsem.search.store import DocStore, Row
from staticsem.search.vectors import DEFAULT_DTYPE, HnswSettings, VectorIndex, vector_file

CONFIG, DATABASE = "config.json", "docs.sqlite"
BM25_COMMON_DF = 1.0  # BM25 leaves out words in more than this share of documents (1.0: exact BM25)
FORMAT = "staticsem-index"


class Index:
    """Open with ``Index.open``, create with ``Index.build``; see the module docstring for the files."""

    def __init__(self, path: Path, model: StaticModel, config: dict[str, Any], *, read_only: bool) -> None:
        self.path, self.model, self.config, self.read_only = path, model, config, read_only
        vectors = config["vectors"]
        self.dtype: str = vectors["dtype"]
        self.hnsw = HnswSettings(**{k: v for k, v in vectors.items() if k != "dtype"})
        self.fusion = FusionSettings(**config["fusion"])
        self.bm25_common_df = float(config.get("bm25", {}).get("common_df", BM25_COMMON_DF))
        self.store = DocStore(path / DATABASE, read_only=read_only, common_df=self.bm25_common_df)
        self._lock = threading.RLock()
        self.generation = self.store.generation()
        self.vectors = self._load_vectors(self.generation)
        if not read_only:
            self._clean_stale_files()

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
        static, model_path = resolve_model(model)
        hnsw = hnsw or HnswSettings()
        if not 0 < bm25_common_df <= 1:
            raise InputError(f"bm25_common_df must be in (0, 1], got {bm25_common_df}")
        config = {
            "format": FORMAT,
            "version": 1,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "model": {
                "path": model_path,
                "sha256": model_sha256(static),
                "dim": static.dim,
                "words": len(static),
            },
            "vectors": {"dtype": dtype, **asdict(hnsw)},
            "fusion": (fusion or FusionSettings()).to_dict(),
            "bm25": {"common_df": bm25_common_df},
        }
        path = Path(path)
        with atomic_folder(path, markers=(CONFIG, DATABASE), what="index") as tmp:
            (tmp / CONFIG).write_text(json.dumps(config, indent=2), encoding="utf-8")
            DocStore(tmp / DATABASE, create=True).close()
            VectorIndex(static.dim, dtype, hnsw).save(vector_file(tmp, 0))  # checks dtype
            index = cls(tmp, static, config, read_only=False)
            try:
                index.add(documents, upsert=upsert, batch_size=batch_size, show_progress=show_progress)
            finally:
                index.close()
        return cls(path, static, config, read_only=False)

    @classmethod
    def open(
        cls, path: str | Path, model: StaticModel | str | Path | None = None, *, read_only: bool = False
    ):
        """Open an index; the model defaults to the one recorded in its ``config.json``.

        :raises InputError: when the model's weights differ from the ones the index was built with.
        :raises ModelFormatError: for a missing or corrupt index file.
        """
        path = Path(path)
        config = _read_config(path)
        recorded = config["model"]
        if model is None:
            if not recorded.get("path") or not Path(recorded["path"]).exists():
                raise InputError(
                    f"{path}: its model {recorded.get('path')} is missing; give the model it was built with"
                )
            model = recorded["path"]
        static, _ = resolve_model(model)
        sha256 = model_sha256(static)
        if sha256 != recorded["sha256"]:
            raise InputError(
                f"{path} was built with another model ({recorded.get('path')}, sha256 "
                f"{recorded['sha256'][:12]}…); this one has sha256 {sha256[:12]}… — "
                "query with the same model or rebuild the index"
            )
        return cls(path, static, config, read_only=read_only)

    def _load_vectors(self, generation: int) -> VectorIndex:
        path = vector_file(self.path, generation)
        return VectorIndex(self.model.dim, self.dtype, self.hnsw, path, view=self.read_only)

    def _clean_stale_files(self) -> None:
        keep = vector_file(self.path, self.generation).name
        for stale in [*self.path.glob("vectors-*.usearch"), *self.path.glob(".vectors-*.tmp")]:
            if stale.name != keep:
                stale.unlink(missing_ok=True)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self.store.documents()

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
        with self._transaction(), progress(show_progress) as advance:
            added = 0
            for batch in batches(documents, batch_size):
                added += self._add_batch([Document.coerce(item) for item in batch], upsert)
                advance(len(batch))
            return added

    def _add_batch(self, docs: list[Document], upsert: bool) -> int:
        given = [d.id for d in docs if d.id is not None]
        existing = self.store.keys_of(given)
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
            self._remove([existing[i] for i in dict.fromkeys(given) if i in existing])
            last = {d.id: n for n, d in enumerate(docs) if d.id is not None}
            docs = [d for n, d in enumerate(docs) if d.id is None or last[d.id] == n]
        vectors = self.model.encode([d.text for d in docs], normalize=True)
        zero = ~np.any(vectors, axis=1)
        first = self.store.next_key()
        keys = np.arange(first, first + len(docs), dtype=np.int64)
        rows = [
            (int(k), d.id or str(k), d.text, d.metadata, bool(z))
            for k, d, z in zip(keys, docs, zero, strict=True)
        ]
        try:
            self.store.insert(rows)
        except Exception as exc:  # an assigned id equal to a given one
            if "UNIQUE" not in str(exc):
                raise
            raise InputError(f"duplicate document id ({exc}); give every document an id") from None
        self.vectors.add(keys[~zero], vectors[~zero])
        return len(docs)

    def _remove(self, found: list[tuple[int, int]]) -> None:
        self.store.delete([key for key, _ in found])
        self.vectors.remove([key for key, zero in found if not zero])

    def delete(self, ids: Iterable[str]) -> int:
        """Delete documents by id.

        :raises InputError: naming ids that are not in the index (then none is deleted).
        """
        ids = list(dict.fromkeys(str(i) for i in ids))
        with self._transaction():
            found = self.store.keys_of(ids)
            missing = [i for i in ids if i not in found]
            if missing:
                raise InputError(f"no document with id {', '.join(map(repr, missing[:5]))} in {self.path}")
            self._remove(list(found.values()))
        return len(ids)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One SQLite transaction + the next vector generation, all or nothing."""
        if self.read_only:
            raise InputError(f"{self.path} is open read-only")
        with self._lock:
            writer = self.store.writer
            assert writer is not None
            writer.execute("BEGIN IMMEDIATE")  # no other process commits until we do: refresh after it
            try:
                self._refresh()
            except BaseException:
                writer.execute("ROLLBACK")
                raise
            new = self.generation + 1
            try:
                yield
                self.vectors.save(vector_file(self.path, new))
                self.store.set_generation(new)
                writer.execute("COMMIT")
            except BaseException:
                writer.execute("ROLLBACK")
                vector_file(self.path, new).unlink(missing_ok=True)
                self.vectors = self._load_vectors(self.generation)
                raise
            vector_file(self.path, self.generation).unlink(missing_ok=True)
            self.generation = new

    def _refresh(self) -> None:
        """Reload the vectors when another process committed a newer generation."""
        generation = self.store.generation()
        if generation != self.generation:
            self.vectors = self._load_vectors(generation)
            self.generation = generation

    # ------------------------------------------------------------------ searching
    def search(
        self,
        query: str,
        k: int = 10,
        *,
        mode: SearchMode | str = SearchMode.HYBRID,
        where: dict[str, str] | None = None,
        exact: bool = False,
        fusion: FusionSettings | None = None,
    ) -> list[Hit]:
        """The ``k`` best documents for ``query``; ``where`` keeps documents whose metadata fields equal
        the given values (compared as text)."""
        mode = parse_choice(SearchMode, mode, "search mode")
        if not isinstance(query, str):
            raise InputError(f"the query must be a string, got {type(query).__name__}")
        if k < 1:
            raise InputError(f"k must be positive, got {k}")
        fusion = fusion or self.fusion
        with self._lock:
            self._refresh()
            vectors = self.vectors
        if mode is SearchMode.BM25:
            return [_hit(row, score) for row, score in self.store.bm25(query, k, where)]
        depth = k if mode is SearchMode.DENSE else max(k, fusion.depth)
        dense = self.dense(vectors, self.model.encode(query, normalize=True), depth, where, exact)
        if mode is SearchMode.DENSE:
            ranked = dense
            rows = self.store.rows([key for key, _ in ranked])
        else:
            lexical = self.store.bm25(query, depth, where)
            rows = {row[0]: row for row, _ in lexical}
            ranked = fuse(
                [dense, [(row[0], s) for row, s in lexical]],
                [fusion.dense_weight, fusion.bm25_weight],
                fusion,
            )[:k]
            rows.update(self.store.rows([key for key, _ in ranked if key not in rows]))
        return [_hit(rows[key], score) for key, score in ranked if key in rows]

    def dense(
        self, vectors: VectorIndex, query: np.ndarray, k: int, where: dict[str, str] | None, exact: bool
    ) -> list[tuple[int, float]]:
        """Nearest keys by cosine; filtered: HNSW with growing over-fetch, or exact over the matches."""
        if not np.any(query):
            return []
        if not where:
            return vectors.search(query, k, exact=exact)
        allowed = self.store.keys_where(where)
        if exact or len(allowed) <= self.hnsw.exact_threshold:
            return vectors.search_among(query, allowed, k)
        keep, fetch = set(allowed), k * max(2, 2 * len(vectors) // max(len(allowed), 1))
        while fetch < len(vectors):
            hits = [hit for hit in vectors.search(query, fetch) if hit[0] in keep]
            if len(hits) >= k:
                return hits[:k]
            fetch *= 4
        return vectors.search_among(query, allowed, k)

    # ------------------------------------------------------------------ describing
    def info(self) -> dict[str, Any]:
        """What the index holds and how it was built (JSON-serialisable)."""
        total, zero = self.store.counts()
        files = [p for p in self.path.iterdir() if p.is_file()]
        return {
            "path": str(self.path),
            "documents": total,
            "zero_vectors": zero,
            "vectors": len(self.vectors),
            "dim": self.model.dim,
            "dtype": self.dtype,
            "dense_search": "exact" if len(self.vectors) <= self.hnsw.exact_threshold else "hnsw",
            "model": self.config["model"],
            "hnsw": asdict(self.hnsw),
            "fusion": self.fusion.to_dict(),
            "bm25": {"common_df": self.bm25_common_df},
            "created": self.config.get("created"),
            "bytes_on_disk": sum(p.stat().st_size for p in files),
        }


def _hit(row: Row, score: float) -> Hit:
    key, doc_id, text, metadata = row
    return Hit(doc_id, float(score), text, json.loads(metadata))


def _read_config(path: Path) -> dict[str, Any]:
    from staticsem.io.common import read_json

    if not path.is_dir():
        raise InputError(f"{path}: no index folder here")
    config = read_json(path / CONFIG)
    if config.get("format") != FORMAT:
        raise ModelFormatError(f"{path / CONFIG}: not a staticsem index (format {config.get('format')!r})")
    for key in ("model", "vectors", "fusion"):
        if not isinstance(config.get(key), dict):
            raise ModelFormatError(f"{path / CONFIG}: {key!r} is missing or not an object")
    return config
