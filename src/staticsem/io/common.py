"""Readers shared by the format modules, turning every failure into a ``ModelFormatError``."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from safetensors import safe_open
from tokenizers import Tokenizer

from staticsem.errors import ModelFormatError
from staticsem.io.atomic import atomic_file
from staticsem.modes import describe_modes, modes_config

if TYPE_CHECKING:
    from staticsem.io.native_write import SavedModel
    from staticsem.modes import ModeSettings

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def naming(path: Path) -> Iterator[None]:
    """Prefix ``path`` to a ``ModelFormatError`` raised inside (the model constructor knows no file)."""
    try:
        yield
    except ModelFormatError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise ModelFormatError(f"{path}: {exc}") from None


def warn_dropped_ngrams(model: SavedModel, format_name: str) -> None:
    """Warn (once per export) that ``format_name`` files lose n-gram vectors, the word splitter or the
    encoding modes."""
    if model.ngrams is not None or model.pieces is not None:
        logger.warning(
            "%s files cannot hold %s: exporting without them "
            "(unknown words get no vector or a known prefix's; the staticsem format keeps them)",
            format_name,
            "fastText n-gram vectors" if model.ngrams is not None else "subword piece vectors",
        )
    if model.splitter.name != "words":
        logger.warning(
            "%s files do not record the %r word splitter: readers split words at spaces and "
            "punctuation only (the staticsem format keeps it)",
            format_name,
            model.splitter.name,
        )
    if model.modes:
        logger.warning(
            "%s files cannot hold encoding modes (%s): exporting encode's vectors only, so queries and "
            "documents encode alike (the staticsem format keeps them)",
            format_name,
            describe_modes(model.modes),
        )


def require_file(path: Path) -> Path:
    """Return ``path`` if it is a file, else raise naming it."""
    if not path.is_file():
        raise ModelFormatError(f"{path}: file is missing")
    return path


def read_json(path: Path, expect: type = dict) -> Any:
    """Parse a JSON file whose top level must be ``expect``."""
    try:
        value = json.loads(require_file(path).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelFormatError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(value, expect):
        raise ModelFormatError(f"{path}: expected a JSON {expect.__name__}, got {type(value).__name__}")
    return value


def read_safetensors(path: Path, required: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """All tensors of a safetensors file as numpy arrays."""
    try:
        with safe_open(str(require_file(path)), framework="numpy") as handle:
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118
    except ModelFormatError:
        raise
    except Exception as exc:  # safetensors raises its own untyped errors
        raise ModelFormatError(f"{path}: corrupt or truncated safetensors file ({exc})") from None
    missing = [key for key in required if key not in tensors]
    if missing:
        raise ModelFormatError(f"{path}: no tensor named {missing[0]!r} (has {sorted(tensors)})")
    return tensors


def read_tokenizer(path: Path) -> Tokenizer:
    """Load an HF ``tokenizer.json``."""
    try:
        return Tokenizer.from_file(str(require_file(path)))
    except ModelFormatError:
        raise
    except Exception as exc:  # tokenizers raises plain Exception
        raise ModelFormatError(f"{path}: not a valid tokenizer.json ({exc})") from None


def write_modes(path: Path, modes: Mapping[str, ModeSettings]) -> Path:
    """Replace the encoding modes in the staticsem folder ``path`` (its ``config.json``, atomically; the
    weights are not rewritten)."""
    config = read_json(path / "config.json")
    config.pop("modes", None)
    if modes:
        config["modes"] = modes_config(modes)
    return _write_config(path, config)


def write_metadata(path: Path, **values: Any) -> Path:
    """Set ``values`` in the metadata of the staticsem folder ``path`` (its ``config.json``, atomically)."""
    config = read_json(path / "config.json")
    config["metadata"] = {**(config.get("metadata") or {}), **values}
    return _write_config(path, config)


def _write_config(path: Path, config: dict[str, Any]) -> Path:
    with atomic_file(path / "config.json") as tmp:
        tmp.write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")
    return path
