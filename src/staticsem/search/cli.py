"""``staticsem index build|add|delete|info|optimize|migrate|export`` and ``staticsem search`` (registered
in ``staticsem.cli``). usearch, tantivy and SQLite load only when a command runs.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from staticsem.errors import InputError
from staticsem.io.hub import REVISION_HELP
from staticsem.search.vectors import DEFAULT_DTYPE

if TYPE_CHECKING:
    from staticsem.search.documents import Document

_out = Console()
_err = Console(stderr=True)

DocsArg = Annotated[
    list[str],
    typer.Argument(help="Document files: .txt (one per line), .jsonl, .csv, .tsv, .gz of each, or -."),
]
TextColumnOpt = Annotated[str, typer.Option(help="csv/tsv column (jsonl field) holding the text.")]
IdColumnOpt = Annotated[
    str | None, typer.Option(help="csv/tsv column (jsonl field, default 'id') holding the document id.")
]
FormatOpt = Annotated[
    str | None, typer.Option("--format", help="txt, jsonl, csv or tsv (default: from the file name).")
]
UpsertOpt = Annotated[bool, typer.Option("--upsert", help="Replace documents whose id is already indexed.")]
ErrorsOpt = Annotated[str, typer.Option(help="Non-UTF-8 bytes: strict (error) or replace.")]
IndexArg = Annotated[Path, typer.Argument(help="Index folder.")]

BUILD_EPILOG = "Example: `staticsem index build models/demo docs.jsonl --out my-index`"
SEARCH_EPILOG = 'Example: `staticsem search my-index "how do vaccines work" -k 5 --mode hybrid`'


def _documents(
    sources: list[str], fmt: str | None, text_column: str, id_column: str | None, errors: str
) -> Iterator[Document]:
    from staticsem.errors import parse_choice
    from staticsem.lines import Errors
    from staticsem.search.documents import read_documents

    mode = parse_choice(Errors, errors, "--errors value")
    if sources.count("-") > 1:
        raise InputError("stdin (-) can be read once")
    return itertools.chain.from_iterable(
        read_documents(s, fmt=fmt, text_column=text_column, id_column=id_column, errors=mode) for s in sources
    )


def build(
    model: Annotated[
        Path, typer.Argument(help="Static model (any format staticsem reads, or a hub name: org/name).")
    ],
    documents: DocsArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Index folder to create (replaced on success).")],
    text_column: TextColumnOpt = "text",
    id_column: IdColumnOpt = None,
    format: FormatOpt = None,
    dtype: Annotated[
        str, typer.Option(help="Vector storage: bfloat16, float16, int8 or float32.")
    ] = DEFAULT_DTYPE,
    exact_threshold: Annotated[
        int, typer.Option(help="Dense search is exact (brute force) up to this many vectors, HNSW above.")
    ] = 8192,
    build_threads: Annotated[
        int,
        typer.Option(
            help="Vector segments a large write builds side by side, each graph on its own thread"
            " (0: one per core)."
        ),
    ] = 0,
    bm25_common_df: Annotated[
        float,
        typer.Option(
            help="BM25 leaves out query words found in more than this share of documents (1 = all)."
        ),
    ] = 1.0,
    upsert: UpsertOpt = False,
    errors: ErrorsOpt = "strict",
    revision: Annotated[str | None, typer.Option(help=REVISION_HELP)] = None,
) -> None:
    """Index documents for dense, BM25 and hybrid search (an interrupted build leaves nothing behind)."""
    from staticsem.io.hub import resolve
    from staticsem.search import HnswSettings, Index

    model = resolve(model, revision)
    docs = _documents(documents, format, text_column, id_column, errors)
    hnsw = HnswSettings(exact_threshold=exact_threshold, add_threads=build_threads)
    options = {"dtype": dtype, "hnsw": hnsw, "bm25_common_df": bm25_common_df, "upsert": upsert}
    with Index.build(model, docs, out, show_progress=True, **options) as index:
        _err.print(f"indexed {len(index):,} documents into {out}")


def add(
    index: IndexArg,
    documents: DocsArg,
    text_column: TextColumnOpt = "text",
    id_column: IdColumnOpt = None,
    format: FormatOpt = None,
    upsert: UpsertOpt = False,
    errors: ErrorsOpt = "strict",
) -> None:
    """Add documents to an index (all or nothing)."""
    from staticsem.search import Index

    with Index.open(index) as opened:
        added = opened.add(
            _documents(documents, format, text_column, id_column, errors), upsert=upsert, show_progress=True
        )
        _err.print(f"added {added:,} documents; {len(opened):,} in {index}")


def delete(
    index: IndexArg,
    ids: Annotated[list[str], typer.Option("--id", help="Id of a document to delete (repeatable).")],
) -> None:
    """Delete documents by id (an unknown id deletes nothing and is an error)."""
    from staticsem.search import Index

    with Index.open(index) as opened:
        _err.print(f"deleted {opened.delete(ids):,} documents; {len(opened):,} left in {index}")


def info(index: IndexArg) -> None:
    """Documents, zero vectors, model, storage and search settings of an index."""
    from staticsem.search import Index

    with Index.open(index, read_only=True) as opened:
        details = opened.info()
    table = Table(show_header=False)
    for key, value in details.items():
        table.add_row(key, value if isinstance(value, str) else json.dumps(value))
    if details["zero_vectors"]:
        table.add_row(
            "note",
            f"{details['zero_vectors']:,} documents have no known word: zero vectors, found by BM25 only",
        )
    _out.print(table)


def optimize(index: IndexArg) -> None:
    """Merge the vector segments into one per core, without deleted vectors (searches get faster)."""
    from staticsem.search import Index

    with Index.open(index) as opened:
        before = len(opened.snapshot.segments)
        opened.merge(optimize=True)
        _err.print(f"{before} vector segments -> {len(opened.snapshot.segments)} in {index}")


def migrate(
    index: IndexArg,
    model: Annotated[Path | None, typer.Option(help="The index's model, if it has moved.")] = None,
) -> None:
    """Convert an index written by an earlier staticsem (format 1) in place (all or nothing)."""
    from staticsem.search.export import migrate as run

    with run(index, model, show_progress=True) as migrated:
        _err.print(f"migrated {len(migrated):,} documents in {index} to format {migrated.config['version']}")


def export(
    index: IndexArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Parquet file to write.")],
) -> None:
    """Write documents, metadata (JSON) and vectors to Parquet, e.g. to load into a distributed engine."""
    from staticsem.search import Index
    from staticsem.search.export import export_parquet

    with Index.open(index, read_only=True) as opened:
        _err.print(f"exported {export_parquet(opened, out):,} documents to {out}")


def search(
    index: IndexArg,
    query: Annotated[str, typer.Argument(help="The query text.")],
    k: Annotated[int, typer.Option("-k", help="How many hits.")] = 10,
    mode: Annotated[str, typer.Option(help="dense, bm25 or hybrid.")] = "hybrid",
    where: Annotated[
        list[str] | None, typer.Option(help="Keep documents whose metadata FIELD=VALUE (repeatable).")
    ] = None,
    exact: Annotated[bool, typer.Option("--exact", help="Exact dense search instead of HNSW.")] = False,
    model: Annotated[Path | None, typer.Option(help="The index's model, if it has moved.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the hits as a JSON array.")] = False,
) -> None:
    """Search an index: dense (static model), BM25 (tantivy) or both fused."""
    from staticsem.search import Index

    filters: dict[str, str] = {}
    for item in where or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InputError(f"--where takes FIELD=VALUE, got {item!r}")
        filters[name] = value
    with Index.open(index, model, read_only=True) as opened:
        hits = opened.search(query, k, mode=mode, where=filters or None, exact=exact)
    if as_json:
        print(json.dumps([hit.to_dict() for hit in hits], ensure_ascii=False))
        return
    table = Table(title=f"{mode} search: {query!r}")
    for column in ("#", "score", "id", "text"):
        table.add_column(column, justify="right" if column in ("#", "score") else "left")
    for rank, hit in enumerate(hits, 1):
        text = hit.text if len(hit.text) <= 200 else hit.text[:199] + "…"
        table.add_row(str(rank), f"{hit.score:.4f}", hit.id, text)
    _out.print(table)
