"""Moving an index's contents out: Parquet for a distributed engine, and in-place migration of an index
written by an earlier format.

``export_parquet`` writes one row per document: ``id``, ``text``, ``metadata`` (a JSON string) and
``vector`` (the stored vector as float32, null for a document with no known word), in key order and in
batches, so an index of any size streams out (pyarrow, from the ``search`` extra).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.errors import InputError, ModelFormatError
from staticsem.io.atomic import atomic_file
from staticsem.search.config import CONFIG, DATABASE
from staticsem.search.index import Index
from staticsem.search.snapshot import Snapshot


def _vectors(snapshot: Snapshot, keys: np.ndarray, dim: int) -> list[np.ndarray | None]:
    found: dict[int, np.ndarray] = {}
    inside = np.isin(snapshot.buffer_keys, keys)
    found.update(zip(snapshot.buffer_keys[inside].tolist(), snapshot.buffer[inside], strict=True))
    for segment in snapshot.segments:
        held = keys[segment.holds(keys)]
        found.update(zip(held.tolist(), segment.vectors(held), strict=True))
    return [found.get(int(k)) for k in keys]


def export_parquet(index: Index, dest: str | Path, *, batch: int = 50_000) -> int:
    """Write the index's documents, metadata and vectors to the Parquet file ``dest`` (atomically).

    :returns: the number of rows written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    dim = index.model.dim
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("text", pa.string()),
            ("metadata", pa.string()),
            ("vector", pa.list_(pa.float32(), dim)),
        ]
    )
    snapshot = index._refresh()
    written = 0
    with atomic_file(Path(dest)) as tmp, pq.ParquetWriter(str(tmp), schema) as writer:
        for rows in index.store.iter_docs(batch=batch, conn=index.store.reader):
            keys = np.asarray([row[0] for row in rows], dtype=np.int64)
            vectors = _vectors(snapshot, keys, dim)
            columns = {
                "id": [row[1] for row in rows],
                "text": [row[2] for row in rows],
                "metadata": [row[3] for row in rows],
                "vector": [None if v is None else np.asarray(v, dtype=np.float32) for v in vectors],
            }
            writer.write_table(pa.table(columns, schema=schema))
            written += len(rows)
    return written


def _old_documents(database: Path) -> Iterator[dict[str, Any]]:
    conn = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
    try:
        for doc_id, text, metadata in conn.execute("SELECT id, text, metadata FROM docs ORDER BY key"):
            yield {**json.loads(metadata), "text": text, "id": doc_id}
    except sqlite3.DatabaseError as exc:
        raise ModelFormatError(f"{database}: cannot read the old index's documents ({exc})") from None
    finally:
        conn.close()


def migrate(path: str | Path, model: Any = None, *, show_progress: bool = False) -> Index:
    """Rebuild an index of format 1 in place (same documents, ids, metadata and settings), atomically."""
    from staticsem.io.common import read_json

    path = Path(path)
    config = read_json(path / CONFIG)
    if config.get("version") != 1:
        raise InputError(f"{path}: index format {config.get('version')} needs no migration")
    model = model or config["model"]["path"]
    vectors = config["vectors"]
    known = {"connectivity", "expansion_add", "expansion_search", "exact_threshold"}
    from staticsem.search.fusion import FusionSettings
    from staticsem.search.vectors import HnswSettings

    return Index.build(
        model,
        _old_documents(path / DATABASE),
        path,
        dtype=vectors["dtype"],
        hnsw=HnswSettings(**{k: v for k, v in vectors.items() if k in known}),
        fusion=FusionSettings(**config["fusion"]),
        bm25_common_df=float(config.get("bm25", {}).get("common_df", 1.0)),
        show_progress=show_progress,
    )
