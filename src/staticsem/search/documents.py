"""Documents for an index: read streamed from .txt / .jsonl / .csv / .tsv files (``.gz`` too, or stdin).

A document is a text, an optional id and a JSON object of metadata. ``.txt`` holds one document per
line; ``.jsonl`` one JSON object per line (``text``, optional ``id``, every other field is metadata);
``.csv`` / ``.tsv`` a header row, then rows (``text_column``, optional ``id_column``, the other columns
are metadata). Every error names the file and line.
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from staticsem.errors import InputError
from staticsem.lines import Errors, decode_lines

FORMATS = ("txt", "jsonl", "csv", "tsv")
_SUFFIXES = {".txt": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv"}


@dataclass(frozen=True)
class Document:
    """One document: its text, an id (``None``: the index assigns one) and metadata fields."""

    text: str
    id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    where: str = ""  # file:line, for error messages

    @classmethod
    def coerce(cls, item: str | dict[str, Any] | Document, where: str = "") -> Document:
        """A ``Document`` from a text, a ``{"text", "id"?, ...metadata}`` dict or a ``Document``."""
        if isinstance(item, Document):
            return item
        if isinstance(item, str):
            return cls(item, where=where)
        if not isinstance(item, dict):
            raise InputError(
                f"{where or 'document'}: expected a text or an object, got {type(item).__name__}"
            )
        text = item.get("text")
        if not isinstance(text, str):
            raise InputError(f"{where or 'document'}: field 'text' is missing or not a string")
        doc_id = item.get("id")
        if doc_id is not None and not isinstance(doc_id, (str, int)):
            raise InputError(f"{where or 'document'}: field 'id' must be a string or an integer")
        metadata = {k: v for k, v in item.items() if k not in ("text", "id")}
        return cls(text, None if doc_id is None else str(doc_id), metadata, where)


def detect_format(source: str, fmt: str | None = None) -> str:
    """The format of ``source`` from ``fmt`` or its suffix (``.gz`` stripped); stdin defaults to txt."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise InputError(f"unknown document format {fmt!r}; choose one of {', '.join(FORMATS)}")
        return fmt
    if source == "-":
        return "txt"
    path = Path(source)
    suffix = Path(path.stem).suffix if path.suffix == ".gz" else path.suffix
    if suffix.lower() not in _SUFFIXES:
        raise InputError(f"{source}: cannot tell the format from the name; use .txt, .jsonl, .csv or .tsv")
    return _SUFFIXES[suffix.lower()]


def _open(source: str) -> IO[bytes]:  # gzip and plain files both read as byte streams
    if source == "-":
        return sys.stdin.buffer
    path = Path(source)
    if not path.is_file():
        raise InputError(f"{source}: document file is missing")
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")  # type: ignore[return-value]


def read_documents(
    source: str,
    *,
    fmt: str | None = None,
    text_column: str = "text",
    id_column: str | None = None,
    errors: Errors = Errors.STRICT,
) -> Iterator[Document]:
    """Stream the documents of one file (or ``-``), in order.

    :raises InputError: for a missing file, bad UTF-8, bad JSON, a missing column or field.
    """
    kind = detect_format(source, fmt)
    name = "<stdin>" if source == "-" else source
    handle = _open(source)
    try:
        lines = decode_lines(_guard_gzip(handle, name), name, errors)
        if kind == "txt":
            for number, line in enumerate(lines, 1):
                yield Document(line, where=f"{name}:{number}")
        elif kind == "jsonl":
            yield from _jsonl(lines, name, id_column or "id", text_column)
        else:
            yield from _table(lines, name, "," if kind == "csv" else "\t", text_column, id_column)
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()


def _guard_gzip(handle: IO[bytes], name: str) -> Iterator[bytes]:
    try:
        yield from handle
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        raise InputError(f"{name}: cannot read the compressed file ({exc})") from None


def _jsonl(lines: Iterable[str], name: str, id_field: str, text_field: str) -> Iterator[Document]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected a JSON object")
        if text_field not in record:
            raise InputError(f"{where}: no {text_field!r} field")
        record = dict(record)
        item = {"text": record.pop(text_field), "id": record.pop(id_field, None), **record}
        yield Document.coerce(item, where)


def _table(
    lines: Iterable[str], name: str, delimiter: str, text_column: str, id_column: str | None
) -> Iterator[Document]:
    reader = csv.reader(lines, delimiter=delimiter)
    try:
        header = next(reader)
    except StopIteration:
        return
    for column in (text_column, id_column):
        if column is not None and column not in header:
            raise InputError(f"{name}:1: no column {column!r} in the header ({', '.join(header)})")
    try:
        for row in reader:
            where = f"{name}:{reader.line_num}"
            if not row:
                continue
            if len(row) != len(header):
                raise InputError(f"{where}: {len(row)} fields, the header has {len(header)}")
            record = dict(zip(header, row, strict=True))
            doc_id = record.pop(id_column) if id_column else None
            text = record.pop(text_column)
            yield Document(text, doc_id, record, where)
    except csv.Error as exc:
        raise InputError(f"{name}:{reader.line_num}: {exc}") from None
