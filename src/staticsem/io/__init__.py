"""Model files in and out: every format is detected on load and can be written by ``export``."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from staticsem.errors import InputError, ModelFormatError, parse_choice
from staticsem.io import common, hf, hub, native, native_write, vectors

if TYPE_CHECKING:
    from staticsem.model import StaticModel


class Format(str, Enum):
    """File formats staticsem reads and writes."""

    STATICSEM = "staticsem"
    WORD2VEC = "word2vec"
    WORD2VEC_BINARY = "word2vec-binary"
    GLOVE = "glove"
    FASTTEXT = "fasttext"
    MODEL2VEC = "model2vec"
    SENTENCE_TRANSFORMERS = "sentence-transformers"


def parse_format(value: str | Format) -> Format:
    """Convert a user string to ``Format`` with a readable error."""
    return parse_choice(Format, value, "format")


def detect(path: str | Path) -> Format:
    """Which format ``path`` holds.

    :raises ModelFormatError: when the path is missing or holds nothing staticsem reads.
    """
    path = Path(path)
    if path.is_dir():
        if (path / "config.json").is_file():
            common.read_json(path / "config.json")  # raises naming the file when it is not valid JSON
        if native.is_native(path):
            return Format.STATICSEM
        if (path / "modules.json").is_file():
            hf.static_module_path(path)  # raises for transformer models, even beside model2vec-like files
        if (path / "config_sentence_transformers.json").is_file() or (
            (path / "modules.json").is_file() and not hf.is_model2vec(path)
        ):
            hf.static_module_path(path)  # raises for transformer models
            return Format.SENTENCE_TRANSFORMERS
        if hf.is_model2vec(path):
            return Format.MODEL2VEC
        raise ModelFormatError(
            f"{path}: folder holds no model staticsem reads (no config.json/model.safetensors)"
        )
    if not path.exists():
        raise ModelFormatError(f"{path}: no such file or folder")
    kind = vectors.sniff(path)
    if kind == "word2vec" and ".vec" in path.suffixes:
        return Format.FASTTEXT
    return Format(kind)


def load(
    path: str | Path,
    *,
    dim: int | None = None,
    format: Format | str | None = None,
    revision: str | None = None,
) -> StaticModel:
    """Load a model from any supported format, optionally keeping only the first ``dim`` dimensions.

    :param path: a file or folder; or a Hugging Face hub name (``org/name``, at ``revision``), downloaded
        into the hub's cache (``staticsem.io.hub``: needs the ``hub`` extra; a path that exists wins).
    """
    path = hub.resolve(path, revision)
    fmt = detect(path) if format is None else parse_format(format)
    readers = {
        Format.STATICSEM: native.load,
        Format.WORD2VEC: vectors.read_text,
        Format.FASTTEXT: vectors.read_text,
        Format.GLOVE: lambda p: vectors.read_text(p, header=False),
        Format.WORD2VEC_BINARY: vectors.read_binary,
        Format.MODEL2VEC: hf.read_model2vec,
        Format.SENTENCE_TRANSFORMERS: hf.read_sentence_transformers,
    }
    model = readers[fmt](path)
    return model if dim is None or dim == model.dim else model.truncate(dim)


def export(
    model: StaticModel, path: str | Path, format: Format | str = Format.STATICSEM, **options: Any
) -> Path:
    """Write ``model`` to ``path`` in ``format`` (options go to the staticsem writer: dtype, scale)."""
    path, fmt = Path(path), parse_format(format)
    if options and fmt is not Format.STATICSEM:
        raise InputError(f"options {sorted(options)} only apply to the staticsem format")
    if fmt is Format.STATICSEM:
        return native_write.save(model, path, **options)
    if fmt is Format.MODEL2VEC:
        return hf.write_model2vec(model, path)
    if fmt is Format.SENTENCE_TRANSFORMERS:
        return hf.write_sentence_transformers(model, path)
    kind = "word2vec" if fmt is Format.FASTTEXT else fmt.value
    return vectors.write(model, path, kind)
