"""Writing staticsem's own folder (read back by ``native.load``); see ``native`` for the layout.

It takes the model through a Protocol of what writing needs, so ``StaticModel.save`` can call it without
an import circle between ``model`` and ``io``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from staticsem.io.atomic import atomic_folder, write_tensors
from staticsem.modes import RowSet, modes_config
from staticsem.quantize import DType, Scale, dequantize, parse_dtype, parse_scale, quantize
from staticsem.version import __version__

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from staticsem.modes import ModeSettings
    from staticsem.ngrams import NgramTable
    from staticsem.pieces import PieceTable
    from staticsem.text import WordSplitter
    from staticsem.tokens import TokenRules

FORMAT = "staticsem"
FORMAT_VERSION = 1


class SavedModel(Protocol):
    """What ``save`` reads of a ``StaticModel``."""

    vocab: list[str]
    vectors: np.ndarray
    scales: np.ndarray | None
    tokenizer: Tokenizer | None
    ngrams: NgramTable | None
    pieces: PieceTable | None
    metadata: dict[str, Any]
    splitter: WordSplitter
    tokens: TokenRules | None
    normalize: bool
    modes: dict[str, ModeSettings]
    row_sets: dict[str, RowSet]

    @property
    def dim(self) -> int: ...

    @property
    def phrases(self) -> list[str]: ...

    @property
    def phrase_mode(self) -> str: ...

    def __len__(self) -> int: ...


def save(
    model: SavedModel,
    path: Path,
    *,
    dtype: DType | str = DType.FLOAT16,
    scale: Scale | str = Scale.ROW,
) -> Path:
    """Write ``model`` atomically to folder ``path`` with the matrix stored as ``dtype``."""
    dtype, scale = parse_dtype(dtype), parse_scale(scale)
    stored: np.ndarray
    scales: np.ndarray | None
    if dtype is DType.INT8 and model.scales is not None and scale is Scale.ROW:
        stored, scales = model.vectors, model.scales
    else:
        stored, scales = quantize(dequantize(model.vectors, model.scales), dtype, scale)
    tensors = {"embeddings": stored}
    if scales is not None:
        tensors["scales"] = scales
    table_dtype = DType.FLOAT32 if dtype is DType.FLOAT32 else DType.FLOAT16
    for name, table in (("ngrams", model.ngrams), ("pieces", model.pieces)):
        if table is not None:
            tensors[name] = quantize(table.vectors, table_dtype)[0]
    for name, rows in model.row_sets.items():
        tensors.update(_row_set(f"rows.{name}", rows, dtype))
    config: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "staticsem_version": __version__,
        "vocab_size": len(model),
        "dim": model.dim,
        "dtype": dtype.value,
        "normalize": model.normalize,
        "has_tokenizer": model.tokenizer is not None,
        "metadata": model.metadata,
    }
    if dtype is DType.INT8:
        config["int8_scale"] = scale.value
    subwords = model.ngrams if model.ngrams is not None else model.pieces
    if subwords is not None:
        config["subwords"] = subwords.config()
    if model.splitter.name != "words":
        config["word_splitter"] = model.splitter.name
    if model.tokens is not None:
        config["token_encoding"] = model.tokens.config()
    if model.modes:
        config["modes"] = modes_config(model.modes)
    phrases = len(model.phrases)
    if phrases:
        config["phrases"] = {"mode": model.phrase_mode, "count": phrases}
    with atomic_folder(path) as tmp:
        write_tensors(tmp / "model.safetensors", tensors)
        (tmp / "vocab.json").write_text(json.dumps(model.vocab, ensure_ascii=False), encoding="utf-8")
        if model.tokenizer is not None:
            model.tokenizer.save(str(tmp / "tokenizer.json"))
        (tmp / "config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def _row_set(prefix: str, rows: RowSet, dtype: DType) -> dict[str, np.ndarray]:
    """A row set's tensors: as the pieces are stored (float16, float32 in a float32 folder), or int8 with
    one scale per row (its pieces too) where the set is int8 and the folder is not float32."""
    parts = {prefix: (rows.vectors, rows.scales), f"{prefix}.pieces": (rows.pieces, None)}
    tensors: dict[str, np.ndarray] = {}
    for name, (array, scales) in parts.items():
        if array is None:
            continue
        if rows.scales is not None and dtype is not DType.FLOAT32:
            stored, stored_scales = quantize(dequantize(array, scales), DType.INT8)
            tensors[name] = stored
            if stored_scales is not None:
                tensors[f"{name}.scales"] = stored_scales
        else:
            table_dtype = DType.FLOAT32 if dtype is DType.FLOAT32 else DType.FLOAT16
            tensors[name] = quantize(dequantize(array, scales), table_dtype)[0]
    return tensors
