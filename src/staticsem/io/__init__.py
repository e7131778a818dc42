"""Model files in and out: every format is detected on load and can be written by ``export``."""

from __future__ import annotations

import logging
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from staticsem.errors import InputError, ModelFormatError, parse_choice
from staticsem.io import hf, hub, layout, native, native_write, vectors

if TYPE_CHECKING:
    from staticsem.model import StaticModel

logger = logging.getLogger(__name__)


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
        return Format(layout.folder_format(path))
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
    if phrases := len(model.phrases):
        logger.warning("%s has no phrases: %s phrases dropped, the words kept", fmt.value, f"{phrases:,}")
        model = model.without_phrases()
    if fmt is Format.MODEL2VEC:
        return hf.write_model2vec(model, path)
    if fmt is Format.SENTENCE_TRANSFORMERS:
        return hf.write_sentence_transformers(model, path)
    kind = "word2vec" if fmt is Format.FASTTEXT else fmt.value
    return vectors.write(model, path, kind)


def push(
    model: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    token: str | None = None,
    revision: str | None = None,
    license: str | None = None,
) -> str:
    """Upload a model (a folder, any file staticsem reads, or a hub name at ``revision``) to the hub
    repository ``repo_id`` with a model card: a folder in staticsem's, model2vec's or sentence-transformers'
    layout as it is (``hub.push_folder``), any other model in staticsem's format.

    :returns: the repository's URL.
    :raises InputError: for a bad ``repo_id`` or when the hub refuses (one line).
    """
    import tempfile

    hub.check_repo_id(repo_id)
    source = hub.resolve(model, revision)
    options: dict[str, Any] = {"private": private, "token": token, "license": license}
    if hub.is_model_folder(source):
        return hub.push_folder(source, repo_id, **options)
    with tempfile.TemporaryDirectory(prefix="staticsem-push-") as scratch:
        folder = load(source).save(Path(scratch) / source.resolve().name)  # the name its reports know
        return hub.push_folder(folder, repo_id, **options)
