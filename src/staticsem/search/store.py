"""The index's single source of truth: one SQLite file (WAL) holding what is committed.

Tables:

* ``docs``: every document's integer ``key`` (never reused; the vector and lexical key), unique string
  ``id``, text, metadata JSON and ``zero`` flag (no known word: no vector, found by BM25 only).
* ``terms``: ``field=value`` filter terms of each document's metadata (``metadata_terms``), for ``where``.
* ``buffer``: vectors of recent small writes, searched exactly until they are flushed into a segment.
* ``segments``: the vector segment files (immutable) that make up the committed state.
* ``tombstones``: ``(key, segment)`` of vectors a segment still holds but no longer serves: deleted
  documents, and vectors its graph strands (served by a flat segment); dropped when it is merged.
* ``lexical_deletes``: deleted keys the lexical engine has not committed yet (its redo log, with
  ``state.lexical_key``: documents above that key are not yet committed there).
* ``state``: counters: ``generation`` (bumped by every commit), ``layout`` (bumped when segments change),
  ``documents``, ``lexical_key``, ``segment_seq``, ``burials`` (bumped when tombstones are added),
  ``lexical_generation`` (bumped by every lexical commit: readers reload its searcher).

A write is one SQLite transaction; its commit is the commit point of the whole index
(``staticsem.search.index``).
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.errors import InputError, ModelFormatError

SCHEMA = """
CREATE TABLE docs(
    key INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    zero INTEGER NOT NULL
);
CREATE TABLE terms(term TEXT NOT NULL, key INTEGER NOT NULL, PRIMARY KEY (term, key)) WITHOUT ROWID;
CREATE INDEX terms_by_key ON terms(key);
CREATE TABLE buffer(key INTEGER PRIMARY KEY, vector BLOB NOT NULL);
CREATE TABLE segments(name TEXT PRIMARY KEY, count INTEGER NOT NULL, graph INTEGER NOT NULL);
CREATE TABLE tombstones(key INTEGER NOT NULL, segment TEXT NOT NULL, PRIMARY KEY (key, segment))
    WITHOUT ROWID;
CREATE TABLE lexical_deletes(key INTEGER PRIMARY KEY);
CREATE TABLE state(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO state VALUES ('generation', 0), ('layout', 0), ('documents', 0), ('lexical_key', 0),
    ('segment_seq', 0), ('burials', 0), ('lexical_generation', 0);
"""
_FIELD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
Row = tuple[int, str, str, str]  # key, id, text, metadata JSON


def check_field(name: str) -> str:
    if not _FIELD.fullmatch(name):
        raise InputError(f"metadata field name {name!r} must be letters, digits, '_', '.', '-'")
    return name


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def metadata_terms(metadata: dict[str, Any]) -> list[str]:
    """The ``field=value`` terms a document can be filtered by: strings as they are, numbers and booleans
    as JSON (``3``, ``1.5``, ``true``), each element of a list; ``null``, objects and fields with names a
    filter cannot spell are left out."""
    terms = []
    for name, value in metadata.items():
        if not _FIELD.fullmatch(name):
            continue
        for item in value if isinstance(value, list) else [value]:
            if item is not None and not isinstance(item, (dict, list)):
                terms.append(f"{name}={_value_text(item)}")
    return list(dict.fromkeys(terms))


def where_terms(where: dict[str, Any] | None) -> list[str]:
    """The terms a ``where`` filter asks for (every one must hold)."""
    return [f"{check_field(name)}={_value_text(value)}" for name, value in (where or {}).items()]


MMAP_BYTES = 2**31  # address space only: SQLite maps at most the file (and at most its build limit, 2 GiB)


def _select_in(conn: sqlite3.Connection, sql: str, values: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
    """Rows of ``sql`` (with ``IN ({marks})``) for all ``values``, in chunks under SQLite's variable limit."""
    for start in range(0, len(values), 900):
        chunk = values[start : start + 900]
        yield from conn.execute(sql.format(marks=",".join("?" * len(chunk))), chunk)


class DocStore:
    """The SQLite side of an index: one writer connection, one reader connection per thread."""

    def __init__(self, path: Path, *, create: bool = False, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        if not create and not path.is_file():
            raise ModelFormatError(f"{path}: index database is missing")
        self._local = threading.local()
        try:
            self.writer = None if read_only else self._connect()
            if create:
                assert self.writer is not None
                self.writer.executescript(SCHEMA)
            self.state()  # reads the schema: a corrupt file fails here
        except sqlite3.DatabaseError as exc:
            raise ModelFormatError(f"{path}: not a staticsem index database ({exc})") from None

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
        else:
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")  # a hit's row is a memory read, not a read() call
        return conn

    @property
    def reader(self) -> sqlite3.Connection:
        """This thread's reading connection (sees committed rows only)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    def close(self) -> None:
        for conn in (self.writer, getattr(self._local, "conn", None)):
            if conn is not None:
                conn.close()

    # ------------------------------------------------------------------ reading (committed state)
    def state(self, conn: sqlite3.Connection | None = None) -> dict[str, int]:
        return {name: int(value) for name, value in (conn or self.reader).execute("SELECT * FROM state")}

    def counts(self) -> tuple[int, int]:
        """(documents, documents with a zero vector)."""
        total, zero = self.reader.execute("SELECT COUNT(*), COALESCE(SUM(zero), 0) FROM docs").fetchone()
        return int(total), int(zero)

    def documents(self) -> int:
        """The number of documents (kept in ``state`` by every change: counting rows is O(n))."""
        return self.state()["documents"]

    def rows(self, keys: Sequence[int]) -> dict[int, Row]:
        """Rows by key (keys that no longer exist are absent)."""
        sql = "SELECT key, id, text, metadata FROM docs WHERE key IN ({marks})"
        return {row[0]: row for row in _select_in(self.reader, sql, [int(k) for k in keys])}

    def keys_where(self, where: dict[str, Any]) -> np.ndarray:
        """Sorted keys of the non-zero documents whose metadata match every term of ``where``."""
        terms = where_terms(where)
        joins = " ".join(f"JOIN terms t{i} ON t{i}.key = d.key AND t{i}.term = ?" for i in range(len(terms)))
        sql = f"SELECT d.key FROM docs d {joins} WHERE d.zero = 0 ORDER BY d.key"
        return np.fromiter((k for (k,) in self.reader.execute(sql, terms)), dtype=np.int64)

    def segments(self, conn: sqlite3.Connection | None = None) -> list[tuple[str, int, bool]]:
        rows = (conn or self.reader).execute("SELECT name, count, graph FROM segments ORDER BY name")
        return [(name, int(count), bool(graph)) for name, count, graph in rows]

    def tombstones(self, conn: sqlite3.Connection | None = None) -> dict[str, np.ndarray]:
        """Deleted keys per segment whose vectors the segment still holds."""
        found: dict[str, list[int]] = {}
        for key, segment in (conn or self.reader).execute("SELECT key, segment FROM tombstones"):
            found.setdefault(segment, []).append(key)
        return {name: np.asarray(sorted(keys), dtype=np.int64) for name, keys in found.items()}

    def buffer(self, known: set[int] | None = None) -> tuple[np.ndarray, list[bytes | None]]:
        """Keys of the buffered vectors, with each one's bytes (``None`` for keys in ``known``)."""
        keys, blobs = [], []
        if known is None:
            for key, blob in self.reader.execute("SELECT key, vector FROM buffer ORDER BY key"):
                keys.append(key)
                blobs.append(blob)
        else:
            for (key,) in self.reader.execute("SELECT key FROM buffer ORDER BY key"):
                keys.append(key)
                blobs.append(None)
            missing = [k for k in keys if k not in known]
            found = dict(
                _select_in(self.reader, "SELECT key, vector FROM buffer WHERE key IN ({marks})", missing)
            )
            blobs = [found.get(k) for k in keys]
        return np.asarray(keys, dtype=np.int64), blobs

    def iter_docs(
        self, after: int = 0, batch: int = 10_000, conn: sqlite3.Connection | None = None
    ) -> Iterator[list[Row]]:
        """Documents with keys above ``after``, in key order, in batches."""
        conn = conn or self.writer or self.reader
        while rows := conn.execute(
            "SELECT key, id, text, metadata FROM docs WHERE key > ? ORDER BY key LIMIT ?", (after, batch)
        ).fetchall():
            yield rows
            after = rows[-1][0]

    # ------------------------------------------------------------------ writing (inside a transaction)
    @property
    def w(self) -> sqlite3.Connection:
        if self.writer is None:
            raise InputError(f"{self.path.parent} is open read-only")
        return self.writer

    def keys_of(self, ids: Iterable[str]) -> dict[str, tuple[int, int]]:
        """``{id: (key, zero)}`` of the given ids that exist (the writer's view, inside its transaction)."""
        sql = "SELECT id, key, zero FROM docs WHERE id IN ({marks})"
        return {doc_id: (key, zero) for doc_id, key, zero in _select_in(self.w, sql, list(ids))}

    def next_key(self) -> int:
        row = self.w.execute("SELECT seq FROM sqlite_sequence WHERE name = 'docs'").fetchone()
        return (int(row[0]) if row else 0) + 1

    def insert(self, rows: Sequence[tuple[int, str, str, dict[str, Any], bool]]) -> None:
        self.w.executemany(
            "INSERT INTO docs(key, id, text, metadata, zero) VALUES (?, ?, ?, ?, ?)",
            [(k, i, t, json.dumps(m, ensure_ascii=False), int(z)) for k, i, t, m, z in rows],
        )
        terms = [(term, k) for k, _, _, m, _ in rows if m for term in metadata_terms(m)]
        if terms:
            self.w.executemany("INSERT INTO terms(term, key) VALUES (?, ?)", terms)

    def delete(self, keys: Sequence[int]) -> None:
        """Delete documents (and their filter terms and buffered vectors); log them for the lexical side."""
        params = [(int(k),) for k in keys]
        self.w.executemany("DELETE FROM docs WHERE key = ?", params)
        self.w.executemany("DELETE FROM buffer WHERE key = ?", params)
        self.w.executemany("INSERT OR IGNORE INTO lexical_deletes(key) VALUES (?)", params)
        self.w.executemany("DELETE FROM terms WHERE key = ?", params)  # terms_by_key: no table scan

    def bury(self, segment_keys: Iterable[tuple[int, str]]) -> None:
        """Tombstones for deleted keys whose vectors stay in a segment until it is merged."""
        rows = list(segment_keys)
        if rows:
            self.w.executemany("INSERT OR IGNORE INTO tombstones(key, segment) VALUES (?, ?)", rows)
            self.w.execute("UPDATE state SET value = value + 1 WHERE name = 'burials'")

    def buffer_add(self, keys: np.ndarray, vectors: np.ndarray) -> None:
        rows = np.ascontiguousarray(vectors, dtype=np.float32)
        self.w.executemany(
            "INSERT INTO buffer(key, vector) VALUES (?, ?)",
            [(int(k), row.tobytes()) for k, row in zip(keys, rows, strict=True)],
        )

    def take_buffer(self) -> tuple[np.ndarray, np.ndarray]:
        """Empty the buffer, returning its keys and float32 vectors."""
        pairs = self.w.execute("SELECT key, vector FROM buffer ORDER BY key").fetchall()
        self.w.execute("DELETE FROM buffer")
        keys = np.asarray([k for k, _ in pairs], dtype=np.int64)
        return keys, np.vstack([np.frombuffer(b, dtype=np.float32) for _, b in pairs]) if pairs else np.empty(
            0
        )

    def next_segment(self) -> int:
        self.w.execute("UPDATE state SET value = value + 1 WHERE name = 'segment_seq'")
        return self.state(self.w)["segment_seq"]

    def replace_segments(self, removed: Sequence[str], added: Sequence[tuple[str, int, bool]]) -> None:
        """Swap segments in the committed layout; tombstones of removed segments go with them."""
        for name in removed:
            self.w.execute("DELETE FROM segments WHERE name = ?", (name,))
            self.w.execute("DELETE FROM tombstones WHERE segment = ?", (name,))
        self.w.executemany("INSERT INTO segments(name, count, graph) VALUES (?, ?, ?)", added)
        self.w.execute("UPDATE state SET value = value + 1 WHERE name = 'layout'")

    def finish_commit(self, added: int, deleted: int) -> None:
        """Bump the generation and the document count (inside the transaction, before COMMIT)."""
        self.w.execute("UPDATE state SET value = value + 1 WHERE name = 'generation'")
        self.w.execute("UPDATE state SET value = value + ? WHERE name = 'documents'", (added - deleted,))

    def lexical_done(self, key: int) -> None:
        """The lexical engine has committed every document up to ``key`` and every logged delete."""
        self.w.execute("BEGIN IMMEDIATE")
        self.w.execute("UPDATE state SET value = ? WHERE name = 'lexical_key'", (key,))
        self.w.execute("UPDATE state SET value = value + 1 WHERE name = 'lexical_generation'")
        self.w.execute("DELETE FROM lexical_deletes")
        self.w.execute("COMMIT")

    def lexical_pending(self) -> tuple[int, int, list[int]]:
        """(lexical_key, the last committed key, logged deletes): what the lexical engine still lacks."""
        state = self.state(self.w)
        last = self.next_key() - 1
        deletes = [k for (k,) in self.w.execute("SELECT key FROM lexical_deletes ORDER BY key")]
        return state["lexical_key"], last, deletes
