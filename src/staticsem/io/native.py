"""staticsem's own folder: safetensors + ``vocab.json`` + optional ``tokenizer.json`` + ``config.json``.

Token-level models (imported from model2vec / sentence-transformers) add a ``token_encoding`` config entry
(``staticsem.tokens.TokenRules``) and keep their tokenizer; ``normalize`` is their default normalisation.
fastText models add an ``ngrams`` tensor (buckets × D) and a ``subwords`` config entry (type, minn, maxn,
buckets, lowercase). The table is stored as the matrix's dtype, except for int8 models: float16 (one
scale per bucket would cost as much as the int8 savings, and unknown words are rare).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from staticsem.errors import ModelFormatError
from staticsem.io.atomic import atomic_folder, write_tensors
from staticsem.io.common import naming, read_json, read_safetensors, read_tokenizer
from staticsem.model import StaticModel
from staticsem.ngrams import NgramTable
from staticsem.quantize import DType, Scale, dequantize, parse_dtype, parse_scale, quantize
from staticsem.tokens import TokenRules
from staticsem.version import __version__

FORMAT = "staticsem"
FORMAT_VERSION = 1


def is_native(path: Path) -> bool:
    """True when ``path`` is a folder written by ``save``."""
    config = path / "config.json"
    if not (path.is_dir() and config.is_file()):
        return False
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("format") == FORMAT
    except (ValueError, UnicodeDecodeError, AttributeError):
        return False


def save(
    model: StaticModel,
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
    if model.ngrams is not None:
        table_dtype = DType.FLOAT32 if dtype is DType.FLOAT32 else DType.FLOAT16
        tensors["ngrams"] = quantize(model.ngrams.vectors, table_dtype)[0]
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
    if model.ngrams is not None:
        config["subwords"] = model.ngrams.config()
    if model.splitter.name != "words":
        config["word_splitter"] = model.splitter.name
    if model.tokens is not None:
        config["token_encoding"] = model.tokens.config()
    with atomic_folder(path) as tmp:
        write_tensors(tmp / "model.safetensors", tensors)
        (tmp / "vocab.json").write_text(json.dumps(model.vocab, ensure_ascii=False), encoding="utf-8")
        if model.tokenizer is not None:
            model.tokenizer.save(str(tmp / "tokenizer.json"))
        (tmp / "config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def load(path: Path) -> StaticModel:
    """Read a folder written by ``save``.

    :raises ModelFormatError: for missing, corrupt or inconsistent files.
    """
    config = read_json(path / "config.json")
    vocab = read_json(path / "vocab.json", expect=list)
    tensors = read_safetensors(path / "model.safetensors", required=("embeddings",))
    tokenizer = read_tokenizer(path / "tokenizer.json") if config.get("has_tokenizer") else None
    metadata = config.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ModelFormatError(f"{path / 'config.json'}: 'metadata' must be a JSON object")
    scales = tensors.get("scales")
    if scales is not None and scales.size == 1:
        scales = np.full(len(vocab), float(scales.reshape(-1)[0]), dtype=np.float32)
    with naming(path):
        ngrams = None
        if "subwords" in config or "ngrams" in tensors:
            ngrams = NgramTable.from_config(config.get("subwords"), tensors.get("ngrams"))
        return StaticModel(
            vocab,
            tensors["embeddings"],
            scales=scales,
            tokenizer=tokenizer,
            ngrams=ngrams,
            metadata=metadata,
            splitter=str(config.get("word_splitter", "words")),
            tokens=TokenRules.from_config(config["token_encoding"]) if "token_encoding" in config else None,
            normalize=bool(config.get("normalize", True)),
        )
