"""Documents, ids, metadata and BM25 in one SQLite file (WAL, FTS5 external-content table).

Each document has an integer ``key`` (never reused, the vector index's key), a unique string ``id``,
its text, its metadata as a JSON object and a ``zero`` flag (no known word: a zero vector, so BM25 alone
can find it). The ``state`` table holds the generation of the vector file that matches the rows, so a
crash between writing vectors and committing rows cannot mix two states (``staticsem.search.index``).
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from staticsem.errors import InputError, ModelFormatError
from staticsem.text import split_words

TOKENIZER = "porter unicode61 remove_diacritics 2"
SCHEMA = f"""
CREATE TABLE docs(
    key INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    zero INTEGER NOT NULL
);
CREATE VIRTUAL TABLE fts USING fts5(
    text, content='docs', content_rowid='key', tokenize='{TOKENIZER}'
);
CREATE TRIGGER docs_insert AFTER INSERT ON docs BEGIN
    INSERT INTO fts(rowid, text) VALUES (new.key, new.text);
END;
CREATE TRIGGER docs_delete AFTER DELETE ON docs BEGIN
    INSERT INTO fts(fts, rowid, text) VALUES ('delete', old.key, old.text);
END;
CREATE TABLE state(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO state VALUES ('generation', 0), ('documents', 0);
"""
# Per reading connection: the index's term statistics, and a scratch table that runs the query's words
# through the same tokenizer (Porter stems are not idempotent, so words are matched, stems counted).
READER_SCRIPT = f"""
CREATE VIRTUAL TABLE temp.fts_terms USING fts5vocab(main, fts, row);
CREATE VIRTUAL TABLE temp.query_words USING fts5(word, tokenize='{TOKENIZER}');
CREATE VIRTUAL TABLE temp.query_terms USING fts5vocab(temp, query_words, instance);
"""
_FIELD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
Row = tuple[int, str, str, str]  # key, id, text, metadata JSON


def match_query(words: Iterable[str]) -> str | None:
    """An FTS5 query OR-ing ``words`` (each quoted, so no FTS5 syntax leaks through)."""
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words) or None


def where_clause(where: dict[str, str] | None) -> tuple[str, list[Any]]:
    """SQL conditions on ``docs`` (alias ``d``): each metadata field equals the value, compared as text."""
    if not where:
        return "", []
    parts, params = [], []
    for name, value in where.items():
        if not _FIELD.fullmatch(name):
            raise InputError(f"metadata field name {name!r} must be letters, digits, '_', '.', '-'")
        parts.append("CAST(json_extract(d.metadata, ?) AS TEXT) = ?")
        params += [f'$."{name}"', str(value)]
    return " AND " + " AND ".join(parts), params


def _select_in(conn: sqlite3.Connection, sql: str, values: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
    """Rows of ``sql`` (with ``IN ({marks})``) for all ``values``, in chunks under SQLite's variable limit."""
    for start in range(0, len(values), 900):
        chunk = values[start : start + 900]
        yield from conn.execute(sql.format(marks=",".join("?" * len(chunk))), chunk)


class DocStore:
    """The SQLite side of an index: one writer connection, one reader connection per thread.

    :param common_df: BM25 queries leave out words found in more than this share of the documents (their
        IDF is small, and scoring their many documents is most of FTS5's time), unless no other word is
        left; ``1.0`` keeps every word (exact BM25).
    """

    def __init__(
        self, path: Path, *, create: bool = False, read_only: bool = False, common_df: float = 1.0
    ) -> None:
        self.path = path
        self.read_only = read_only
        self.common_df = common_df
        if not create and not path.is_file():
            raise ModelFormatError(f"{path}: index database is missing")
        self._local = threading.local()
        try:
            self.writer = None if read_only else self._connect()
            if create:
                assert self.writer is not None
                self.writer.executescript(SCHEMA)
                self.writer.commit()
            self.generation()  # reads the schema: a corrupt file fails here
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
        return conn

    @property
    def reader(self) -> sqlite3.Connection:
        """This thread's reading connection (sees committed rows only)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
            conn.executescript(READER_SCRIPT)
        return conn

    def close(self) -> None:
        for conn in (self.writer, getattr(self._local, "conn", None)):
            if conn is not None:
                conn.close()

    # ------------------------------------------------------------------ reading
    def generation(self) -> int:
        return int(self.reader.execute("SELECT value FROM state WHERE name = 'generation'").fetchone()[0])

    def counts(self) -> tuple[int, int]:
        """(documents, documents with a zero vector)."""
        total, zero = self.reader.execute("SELECT COUNT(*), COALESCE(SUM(zero), 0) FROM docs").fetchone()
        return int(total), int(zero)

    def rows(self, keys: Sequence[int]) -> dict[int, Row]:
        """Rows by key (keys that no longer exist are absent)."""
        sql = "SELECT key, id, text, metadata FROM docs WHERE key IN ({marks})"
        return {row[0]: row for row in _select_in(self.reader, sql, [int(k) for k in keys])}

    def keys_where(self, where: dict[str, str]) -> list[int]:
        """Keys of the non-zero documents whose metadata match ``where``."""
        clause, params = where_clause(where)
        sql = f"SELECT d.key FROM docs d WHERE d.zero = 0{clause} ORDER BY d.key"
        return [k for (k,) in self.reader.execute(sql, params)]

    def query_words(self, query: str) -> list[str]:
        """The query's distinct words that occur in the index, common ones left out (``common_df``)."""
        words = list(dict.fromkeys(w.lower() for w in split_words(query)))
        if not words:
            return []
        conn = self.reader
        conn.execute("DELETE FROM temp.query_words")
        conn.executemany("INSERT INTO temp.query_words(rowid, word) VALUES (?, ?)", enumerate(words))
        stems: dict[int, set[str]] = {}
        for row, term in conn.execute("SELECT doc, term FROM temp.query_terms"):
            stems.setdefault(row, set()).add(term)
        terms = sorted(set().union(*stems.values())) if stems else []
        marks = ",".join("?" * len(terms))
        df = dict(conn.execute(f"SELECT term, doc FROM temp.fts_terms WHERE term IN ({marks})", terms))
        # a word's documents: at most those of its rarest term (a word of several terms is a phrase)
        found = {words[row]: min(df.get(t, 0) for t in ts) for row, ts in stems.items()}
        found = {word: count for word, count in found.items() if count > 0}
        limit = self.common_df * self.documents()
        kept = [word for word in words if 0 < found.get(word, 0) <= limit]
        if not kept and found:
            kept = [min(found, key=found.__getitem__)]
        return kept

    def documents(self) -> int:
        """The number of documents (kept in ``state`` by every change: counting rows is O(n))."""
        return int(self.reader.execute("SELECT value FROM state WHERE name = 'documents'").fetchone()[0])

    def bm25(self, query: str, limit: int, where: dict[str, str] | None = None) -> list[tuple[Row, float]]:
        """The best ``limit`` documents by FTS5's BM25 (scores negated: higher is better)."""
        match = match_query(self.query_words(query))
        if match is None:
            return []
        clause, params = where_clause(where)
        sql = (
            "SELECT d.key, d.id, d.text, d.metadata, bm25(fts) AS s FROM fts "
            f"JOIN docs d ON d.key = fts.rowid WHERE fts MATCH ?{clause} ORDER BY s LIMIT ?"
        )
        return [
            ((k, i, t, m), -float(s)) for k, i, t, m, s in self.reader.execute(sql, [match, *params, limit])
        ]

    def keys_of(self, ids: Iterable[str]) -> dict[str, tuple[int, int]]:
        """``{id: (key, zero)}`` of the given ids that exist (writer's view, inside its transaction)."""
        sql = "SELECT id, key, zero FROM docs WHERE id IN ({marks})"
        return {
            doc_id: (key, zero)
            for doc_id, key, zero in _select_in(self.writer or self.reader, sql, list(ids))
        }

    # ------------------------------------------------------------------ writing (inside begin/commit)
    def next_key(self) -> int:
        assert self.writer is not None
        row = self.writer.execute("SELECT seq FROM sqlite_sequence WHERE name = 'docs'").fetchone()
        return (int(row[0]) if row else 0) + 1

    def insert(self, rows: Sequence[tuple[int, str, str, dict[str, Any], bool]]) -> None:
        assert self.writer is not None
        self.writer.executemany(
            "INSERT INTO docs(key, id, text, metadata, zero) VALUES (?, ?, ?, ?, ?)",
            [(k, i, t, json.dumps(m, ensure_ascii=False), int(z)) for k, i, t, m, z in rows],
        )

    def delete(self, keys: Sequence[int]) -> None:
        assert self.writer is not None
        self.writer.executemany("DELETE FROM docs WHERE key = ?", [(int(k),) for k in keys])

    def set_generation(self, generation: int) -> None:
        """Record the vector generation that matches the rows (and the document count), at commit."""
        assert self.writer is not None
        self.writer.execute("UPDATE state SET value = ? WHERE name = 'generation'", (generation,))
        self.writer.execute("UPDATE state SET value = (SELECT COUNT(*) FROM docs) WHERE name = 'documents'")
