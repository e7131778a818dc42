"""Reading text input (one text per line) and writing embeddings, with errors that name file and line."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.errors import InputError
from staticsem.io.atomic import atomic_file


class Errors(str, Enum):
    """What to do with bytes that are not UTF-8."""

    STRICT = "strict"
    REPLACE = "replace"


def read_lines(source: str, errors: Errors = Errors.STRICT) -> list[str]:
    """Lines of a file (or ``-`` for stdin) without their line ends, in order.

    NUL bytes become spaces; empty lines stay (they encode to zero rows).

    :raises InputError: for a missing file, or (``strict``) a line that is not UTF-8.
    """
    name = "<stdin>" if source == "-" else source
    if source != "-" and not Path(source).is_file():
        raise InputError(f"{source}: input file is missing")
    if source == "-":
        return list(decode_lines(sys.stdin.buffer, name, errors))
    with Path(source).open("rb") as handle:
        return list(decode_lines(handle, name, errors))


def decode_lines(handle: Iterable[bytes], name: str, errors: Errors = Errors.STRICT) -> Iterator[str]:
    """Decode byte lines (line ends removed, NUL bytes as spaces); bad UTF-8 names ``name:line``."""
    for number, raw in enumerate(handle, start=1):
        raw = raw[:-1] if raw.endswith(b"\n") else raw
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        try:
            text = raw.decode("utf-8", errors=errors.value)
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{name}:{number}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                f"{exc.start + 1}); pass --errors replace to substitute such bytes"
            ) from None
        yield text.replace("\0", " ")


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """A list file's lines, stripped, with their numbers (from 1); bad UTF-8 names ``path:line``."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield number, raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise InputError(f"{path}:{number}: not valid UTF-8") from None


def json_record(line: str, text_field: str, where: str) -> dict[str, Any]:
    """A JSON line's object, which must hold the string ``text_field``; errors name ``where`` (file:line)."""
    try:
        record = json.loads(line)
    except ValueError:
        raise InputError(f"{where}: not a JSON line") from None
    if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
        raise InputError(f"{where}: no string field {text_field!r}")
    return record


def write_embeddings(embeddings: np.ndarray, output: Path) -> None:
    """Write rows to ``.npy`` or ``.jsonl`` (``{"index": i, "embedding": [...]}`` per line), atomically."""
    suffix = output.suffix.lower()
    if suffix not in (".npy", ".jsonl"):
        raise InputError(
            f"{output}: output must end in .npy or .jsonl (or have no suffix: a folder of Parquet shards)"
        )
    with atomic_file(output) as tmp, tmp.open("wb") as handle:
        if suffix == ".npy":
            np.save(handle, embeddings, allow_pickle=False)
        else:
            for index, row in enumerate(embeddings):
                record = {"index": index, "embedding": [round(float(x), 7) for x in row]}
                handle.write((json.dumps(record) + "\n").encode())
