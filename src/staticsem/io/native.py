"""staticsem's own folder: safetensors + ``vocab.json`` + optional ``tokenizer.json`` + ``config.json``.

Token-level models (imported from model2vec / sentence-transformers) add a ``token_encoding`` config entry
(``staticsem.tokens.TokenRules``) and keep their tokenizer; ``normalize`` is their default normalisation.
fastText models add an ``ngrams`` tensor (buckets × D) and a ``subwords`` config entry (type, minn, maxn,
buckets, lowercase). SWE models with learned subword pieces add a ``pieces`` tensor (one row per token of
``tokenizer.json``) and a ``subwords`` entry of type ``pieces`` (count, weight). Either table is stored as
the matrix's dtype, except for int8 models: float16 (one scale per row would cost as much as the int8
savings, and unknown words are rare). A ``modes`` entry holds the settings of ``encode_query`` and
``encode_document`` where they differ from ``encode`` (``staticsem.modes``); rows of the modes' own are
tensors ``rows.NAME`` (V × D) and ``rows.NAME.pieces``, stored as the pieces are, or int8 with
``rows.NAME.scales`` and ``rows.NAME.pieces.scales`` (one per row) where the set is int8.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from staticsem.errors import ModelFormatError
from staticsem.io.common import naming, read_json, read_safetensors, read_tokenizer
from staticsem.model import StaticModel
from staticsem.modes import RowSet, read_modes
from staticsem.ngrams import NgramTable
from staticsem.phrases import DEFAULT_MODE, MODES
from staticsem.pieces import KIND as PIECES
from staticsem.pieces import PieceTable
from staticsem.quantize import dequantize
from staticsem.tokens import TokenRules


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
        ngrams, pieces, subwords = None, None, config.get("subwords")
        if isinstance(subwords, dict) and subwords.get("type") == PIECES or "pieces" in tensors:
            pieces = PieceTable.from_config(subwords, tensors.get("pieces"), tokenizer)
        elif "subwords" in config or "ngrams" in tensors:
            ngrams = NgramTable.from_config(subwords, tensors.get("ngrams"))
        return StaticModel(
            vocab,
            tensors["embeddings"],
            scales=scales,
            tokenizer=tokenizer,
            ngrams=ngrams,
            pieces=pieces,
            metadata=metadata,
            splitter=str(config.get("word_splitter", "words")),
            tokens=TokenRules.from_config(config["token_encoding"]) if "token_encoding" in config else None,
            normalize=bool(config.get("normalize", True)),
            modes=read_modes(config.get("modes")),
            row_sets=_row_sets(tensors),
            phrases=_phrase_mode(config.get("phrases")),
        )


def _phrase_mode(record: object) -> str:
    """The phrase mode a config records (``{"mode": ..., "count": ...}``), the default without one."""
    if record is None:
        return DEFAULT_MODE
    if not isinstance(record, dict) or not isinstance(record.get("mode"), str):
        raise ModelFormatError(f"'phrases' must be an object with a 'mode' ({' or '.join(MODES)})")
    return str(record["mode"])


def _row_sets(tensors: dict[str, np.ndarray]) -> dict[str, RowSet]:
    """The ``rows.NAME`` tensors (with ``rows.NAME.pieces``; int8 ones with ``.scales`` of each) as row sets
    by name; an int8 set's pieces are read back as float16, as the model's own pieces are stored."""
    names = [key.split(".")[1] for key in tensors if key.startswith("rows.") and key.count(".") == 1]
    sets = {}
    for name in names:
        pieces = tensors.get(f"rows.{name}.pieces")
        piece_scales = tensors.get(f"rows.{name}.pieces.scales")
        if pieces is not None and piece_scales is not None:
            pieces = dequantize(pieces, piece_scales).astype(np.float16)
        sets[name] = RowSet(tensors[f"rows.{name}"], pieces, tensors.get(f"rows.{name}.scales"))
    return sets
