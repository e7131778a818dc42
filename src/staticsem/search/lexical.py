"""The lexical side of an index: BM25 on tantivy (a Lucene-style engine: immutable segments, block-max
WAND top-k), in the index's ``lexical/`` folder.

Each document is its text (``simple`` tokenizer, long tokens dropped, lower-cased, ASCII-folded, Snowball
English stemmer), its integer key (indexed and a fast field) and its metadata filter terms (``field=value``,
raw). A query is never query syntax: its text goes through the same analyzer and each distinct term becomes
one optional term clause, so BM25 is exact over every word and quotes, colons, ``AND`` or ``-`` are words.
``where`` terms are required clauses with a constant score of 0 inside the same search, so ``k`` hits come
back whenever ``k`` documents match. tantivy merges its own segments (its log merge policy).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ANALYZER = "staticsem_en"
HEAP_PER_THREAD = 64_000_000  # a small write's writer takes 1 thread and a quarter of it
SMALL_HEAP = 16_000_000


def _analyzer() -> Any:
    from tantivy import Filter, TextAnalyzerBuilder, Tokenizer

    builder = TextAnalyzerBuilder(Tokenizer.simple())
    for item in (Filter.remove_long(40), Filter.lowercase(), Filter.ascii_fold(), Filter.stemmer("english")):
        builder = builder.filter(item)
    return builder.build()


def _schema() -> Any:
    from tantivy import SchemaBuilder

    builder = SchemaBuilder()
    builder.add_text_field("text", tokenizer_name=ANALYZER, index_option="freq")
    builder.add_integer_field("key", indexed=True, fast=True)
    builder.add_text_field("meta", tokenizer_name="raw", index_option="basic")
    return builder.build()


class LexicalIndex:
    """A tantivy index of ``(key, text, metadata terms)``; one writer at a time (``writer``)."""

    def __init__(self, folder: Path, *, create: bool = False) -> None:
        import tantivy

        self.folder = folder
        self.schema = _schema()
        self.analyzer = _analyzer()
        from staticsem.errors import ModelFormatError

        if create:
            folder.mkdir(parents=True, exist_ok=True)
        elif not (folder / "meta.json").is_file():
            raise ModelFormatError(f"{folder}: the lexical index is missing")
        try:
            self.index = tantivy.Index(self.schema, path=str(folder), reuse=not create)
        except (OSError, ValueError) as exc:
            raise ModelFormatError(f"{folder}: not a lexical index ({exc})") from None
        self.index.register_tokenizer(ANALYZER, self.analyzer)
        self.searcher = self.index.searcher()

    def reload(self) -> None:
        """See the last commit (of this process or another)."""
        self.index.reload()
        self.searcher = self.index.searcher()

    def __len__(self) -> int:
        return int(self.searcher.num_docs)

    def segments(self) -> int:
        return int(self.searcher.num_segments)

    # ------------------------------------------------------------------ writing
    def writer(self, threads: int = 1) -> LexicalWriter:
        return LexicalWriter(self, threads)

    # ------------------------------------------------------------------ searching
    def terms(self, text: str) -> list[str]:
        return list(dict.fromkeys(self.analyzer.analyze(text)))

    def search(
        self, text: str, limit: int, where: Iterable[str] = (), common_df: float = 1.0
    ) -> list[tuple[int, float]]:
        """The best ``limit`` keys by BM25 with their scores, among documents holding every ``where`` term.

        ``common_df`` < 1 leaves out terms found in more than that share of documents (unless no other
        term is left): faster, no longer exact.
        """
        from tantivy import Occur, Query

        searcher = self.searcher
        terms = self.terms(text)
        if common_df < 1.0 and len(terms) > 1:
            limit_df = common_df * max(searcher.num_docs, 1)
            df = {t: searcher.doc_freq("text", t) for t in terms}
            kept = [t for t in terms if df[t] <= limit_df]
            terms = kept or [min(terms, key=df.__getitem__)]
        if not terms:
            return []
        query = Query.boolean_query(
            [(Occur.Should, Query.term_query(self.schema, "text", t, "freq")) for t in terms]
        )
        required = [
            Query.const_score_query(Query.term_query(self.schema, "meta", t, "basic"), 0.0) for t in where
        ]
        if required:
            query = Query.boolean_query([(Occur.Must, q) for q in (query, *required)])
        hits = searcher.search(query, limit, count=False).hits
        keys = searcher.fast_field_values("key", [address for _, address in hits])
        return [(int(key), float(score)) for key, (score, _) in zip(keys, hits, strict=True)]  # type: ignore[arg-type]


class LexicalWriter:
    """Adds and deletes, invisible until ``commit``; ``rollback`` forgets them. Holds tantivy's writer
    lock until closed (the index's write lock is held around it)."""

    def __init__(self, lexical: LexicalIndex, threads: int) -> None:
        self.lexical = lexical
        threads = max(1, threads or (os.cpu_count() or 1))
        heap = SMALL_HEAP if threads == 1 else HEAP_PER_THREAD * threads
        self.writer: Any = lexical.index.writer(heap_size=heap, num_threads=threads)

    def add(self, key: int, text: str, terms: Iterable[str]) -> None:
        import tantivy

        doc = tantivy.Document()
        doc.add_text("text", text)
        doc.add_integer("key", key)
        for term in terms:
            doc.add_text("meta", term)
        self.writer.add_document(doc)

    def delete(self, keys: Iterable[int]) -> None:
        for key in keys:
            self.writer.delete_documents_by_term("key", int(key))

    def delete_above(self, key: int) -> None:
        """Delete every document whose key is above ``key`` (a commit that outran the store's)."""
        from tantivy import FieldType, Query

        query = Query.range_query(self.lexical.schema, "key", FieldType.Integer, key + 1, None)
        self.writer.delete_documents_by_query(query)

    def commit(self) -> None:
        self.writer.commit()
        self.lexical.reload()

    def close(self) -> None:
        """Release the writer (and its lock) once the merges its commits started are done; uncommitted
        changes are dropped. Dropping it alone leaves tantivy's merge threads writing and deleting files
        after the write returned (under a folder ``build`` is about to rename, or beside the next write)."""
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.wait_merging_threads()
