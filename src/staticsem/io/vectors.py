"""Plain vector files: word2vec text / binary, GloVe text (no header) and fastText ``.vec``.

Read and written by staticsem itself and checked against gensim's ``KeyedVectors`` in the tests.
Files may be gzip-compressed (``.gz``). Duplicate words keep their first vector, as gensim does.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

import numpy as np

from staticsem.errors import InputError, ModelFormatError
from staticsem.io.atomic import atomic_file
from staticsem.io.common import naming, warn_dropped_ngrams
from staticsem.model import StaticModel
from staticsem.quantize import dequantize

logger = logging.getLogger(__name__)
FASTTEXT_BIN_MAGIC = (793712314).to_bytes(4, "little")
_SNIFF_BYTES = 4096


@contextlib.contextmanager
def _open(path: Path) -> Iterator[IO[bytes]]:
    """Open a plain or gzip file, turning read errors (bad or truncated gzip data) into ModelFormatError."""
    if not path.is_file():
        raise ModelFormatError(f"{path}: file is missing")
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as handle:
            yield cast(IO[bytes], handle)
    except (OSError, EOFError, zlib.error) as exc:
        raise ModelFormatError(f"{path}: cannot read the file ({exc})") from None


def _header(line: bytes) -> tuple[int, int] | None:
    parts = line.split()
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    return None


def sniff(path: Path) -> str:
    """Which vector format a file holds: ``word2vec``, ``word2vec-binary`` or ``glove``."""
    with _open(path) as handle:
        head = handle.read(_SNIFF_BYTES)
    if head.startswith(FASTTEXT_BIN_MAGIC):
        raise ModelFormatError(f"{path}: fastText .bin models are not supported; load the .vec file instead")
    first = head.split(b"\n", 1)[0]
    header = _header(first)
    if header is None:
        if b"\0" in head:
            raise ModelFormatError(f"{path}: binary data without a word2vec header; not a vector file")
        return "glove"
    body = head[len(first) + 1 :]
    try:
        body.decode("utf-8")
        text = b"\0" not in body
    except UnicodeDecodeError as exc:
        cut = len(head) == _SNIFF_BYTES and exc.start > len(body) - 4  # a character cut by the window
        text = cut or _numbers_follow_word(body, header[1])  # or a non-UTF-8 word in a text file
    return "word2vec" if text else "word2vec-binary"


def _numbers_follow_word(body: bytes, dim: int) -> bool:
    """True when the first row of ``body`` is a word and ``dim`` numbers (as text, not float32 bytes)."""
    row, newline, _ = body.partition(b"\n")
    values = row.split()[1:] if newline else row.split()[1:-1]  # an unfinished row may end mid-number
    if not values or (newline and len(values) != dim):
        return False
    try:
        [float(v) for v in values]
    except ValueError:
        return False
    return True


def _decode(word: bytes, path: Path, where: str) -> str:
    try:
        return word.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelFormatError(f"{path}:{where}: word is not valid UTF-8") from None


def _collect(path: Path, rows: Iterator[tuple[str, np.ndarray]], expected: int | None) -> StaticModel:
    """Build a model from (word, vector) rows; ``expected`` is the header's word count, if any."""
    vocab: list[str] = []
    vectors: list[np.ndarray] = []
    seen: set[str] = set()
    skipped = 0
    for word, vector in rows:
        if word in seen:
            skipped += 1
            logger.warning("%s: duplicate word %r, keeping its first vector", path, word)
            continue
        seen.add(word)
        vocab.append(word)
        vectors.append(vector)
    if not vectors:
        raise ModelFormatError(f"{path}: holds no vectors")
    read = len(vectors) + skipped
    if expected is not None and read != expected:
        raise ModelFormatError(
            f"{path}: header announces {expected} words but the file holds {read} (truncated?)"
        )
    with naming(path):
        return StaticModel(vocab, np.stack(vectors), metadata={"source": str(path)})


def _text_rows(
    path: Path, handle: IO[bytes], dim: int | None, start: int
) -> Iterator[tuple[str, np.ndarray]]:
    for number, raw in enumerate(handle, start=start):
        parts = raw.rstrip(b"\r\n").split(b" ")
        parts = [p for p in parts if p] if b"" in parts else parts
        if not parts:
            continue
        dim = dim or len(parts) - 1
        if len(parts) - 1 != dim:
            raise ModelFormatError(
                f"{path}:{number}: expected a word and {dim} values, got {len(parts) - 1} values"
            )
        word = _decode(parts[0], path, str(number))
        try:
            yield word, np.array(parts[1:], dtype=np.float32)
        except ValueError:
            raise ModelFormatError(f"{path}:{number}: values are not numbers") from None


def read_text(path: Path, header: bool = True) -> StaticModel:
    """Read word2vec / fastText ``.vec`` text (``header=True``) or GloVe text (``header=False``)."""
    with _open(path) as handle:
        expected = dim = None
        if header:
            parsed = _header(handle.readline())
            if parsed is None:
                raise ModelFormatError(f"{path}:1: expected a 'words dims' header line")
            expected, dim = parsed
        return _collect(path, _text_rows(path, handle, dim, 2 if header else 1), expected)


def _binary_rows(path: Path, handle: IO[bytes], count: int, dim: int) -> Iterator[tuple[str, np.ndarray]]:
    width = 4 * dim
    for index in range(count):
        word = bytearray()
        while True:
            char = handle.read(1)
            if not char:
                raise ModelFormatError(f"{path}: file ends at word {index + 1} of {count} (truncated?)")
            if char == b" ":
                break
            if char != b"\n" or word:
                word += char
        data = handle.read(width)
        if len(data) != width:
            raise ModelFormatError(
                f"{path}: file ends inside the vector of word {index + 1} of {count} (truncated?)"
            )
        yield _decode(bytes(word), path, f"word {index + 1}"), np.frombuffer(data, dtype="<f4").copy()


def read_binary(path: Path) -> StaticModel:
    """Read the word2vec C tool's binary format (float32 little-endian)."""
    with _open(path) as handle:
        parsed = _header(handle.readline())
        if parsed is None:
            raise ModelFormatError(f"{path}:1: expected a 'words dims' header line")
        return _collect(path, _binary_rows(path, handle, *parsed), parsed[0])


def write(model: StaticModel, path: Path, kind: str) -> Path:
    """Write ``model`` as ``word2vec`` / ``fasttext`` text, ``glove`` text or ``word2vec-binary``."""
    bad = next((w for w in model.vocab if len(w.split()) != 1 or w != w.strip()), None)
    if bad is not None:
        raise InputError(f"word {bad!r} contains whitespace, which {kind} files cannot hold")
    warn_dropped_ngrams(model, kind)
    if model.tokens is not None:
        logger.warning(
            "%s files hold words, not a tokenizer: this token-level model's tokens are written as words "
            "and read back word by word (model2vec, sentence-transformers and staticsem files keep it)",
            kind,
        )
    matrix = dequantize(model.vectors, model.scales)
    with atomic_file(path) as tmp, gzip.open(tmp, "wb") if path.suffix == ".gz" else tmp.open("wb") as out:
        if kind != "glove":
            out.write(f"{len(model)} {model.dim}\n".encode())
        for word, vector in zip(model.vocab, matrix, strict=True):
            if kind == "word2vec-binary":
                out.write(word.encode("utf-8") + b" " + vector.astype("<f4").tobytes() + b"\n")
            else:
                out.write((word + " " + " ".join(f"{x:.9g}" for x in vector) + "\n").encode("utf-8"))
    return path
