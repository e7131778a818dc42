"""model2vec and sentence-transformers static folders, read and written with numpy + tokenizers only.

Reading a folder made by those libraries gives a token-level model (``staticsem.tokens``) that encodes as
the library does: the folder's tokenizer, the mean of all token rows (model2vec's vocabulary-quantisation
``mapping`` and token ``weights`` folded into one row per token), the library's unknown-token and
truncation rules and its normalisation setting (model2vec: ``normalize`` in config.json, default off;
sentence-transformers: a ``Normalize`` module).

Export of a word-level model builds a word-level HF tokenizer over our vocabulary (BERT pre-tokeniser, plus
a lower-case normaliser when every word is lower-case) and appends a zero ``[UNK]`` row: model2vec drops
unknown ids and sentence-transformers' mean over a zero row keeps the direction, so both give our vectors
on in-vocabulary text. What they cannot reproduce: the lower-case retry for cased vocabularies and
staticsem's vectors for unknown words (learned pieces, fastText n-grams or the longest known prefix: they
skip such words). Such folders carry ``staticsem_metadata`` in config.json and our subword tokenizer as
``staticsem_subword_tokenizer.json``, and are read back word-level, losslessly but for a table of pieces or
n-grams, which is not exported (a warning says so; the read-back model uses the prefix rule). A token-level
model is exported with its own tokenizer and rows.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from staticsem.errors import ModelFormatError
from staticsem.io.atomic import atomic_folder, write_tensors
from staticsem.io.common import naming, read_json, read_safetensors, read_tokenizer, warn_dropped_ngrams
from staticsem.io.layout import TOKEN_LEVEL, modules, static_module_path
from staticsem.model import StaticModel
from staticsem.quantize import dequantize
from staticsem.tokens import TokenRules

logger = logging.getLogger(__name__)

UNK = "[UNK]"
SUBWORD_FILE = "staticsem_subword_tokenizer.json"
_ST_STATIC = "sentence_transformers.sentence_transformer.modules.static_embedding.StaticEmbedding"
_ST_NORMALIZE = "sentence_transformers.base.modules.normalize.Normalize"
# modules.json entries as model2vec writes them: StaticEmbedding path and type, Normalize type
_M2V_MODULES = (".", "sentence_transformers.models.StaticEmbedding", "sentence_transformers.models.Normalize")
_M2V_MAX_LENGTH = 512  # model2vec's DEFAULT_MAX_LENGTH


def _matrix(path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    """One row per token id (mapping and weights folded in) and, for int8, unit scales."""
    tensors = read_safetensors(path)
    matrix = tensors.get("embedding.weight", tensors.get("embeddings"))
    if matrix is None:
        raise ModelFormatError(f"{path}: no 'embeddings' or 'embedding.weight' tensor")
    if "mapping" in tensors:
        matrix = matrix[tensors["mapping"]]
    if "weights" in tensors:
        matrix = matrix.astype(np.float32) * tensors["weights"][:, None]
    if matrix.dtype == np.int8:  # model2vec keeps no int8 scale: it averages the stored integers
        return matrix, np.ones(len(matrix), np.float32)
    if matrix.dtype not in (np.float32, np.float16):
        matrix = matrix.astype(np.float32)  # model2vec also stores float64
    return matrix, None


def _model2vec_rules(config: dict[str, Any], vocab: list[str]) -> tuple[TokenRules, bool]:
    """model2vec's ``encode``: unknown tokens dropped, texts cut to ``max_length`` tokens and first to
    ``max_length × median token length`` characters, normalised when config.json says so."""
    max_length = config.get("max_length", _M2V_MAX_LENGTH)
    if max_length is not None and (not isinstance(max_length, int) or max_length < 1):
        raise ModelFormatError(f"'max_length' must be a positive integer or null, got {max_length!r}")
    median = int(np.median([len(token) for token in vocab]))
    max_chars = None if max_length is None else max_length * median
    return TokenRules(True, max_length, max_chars or None), bool(config.get("normalize", False))


def _sentence_transformers_rules(folder: Path, tokenizer: Tokenizer) -> tuple[TokenRules, bool]:
    """StaticEmbedding's ``forward``: every token (the unknown one included) under the tokenizer's own
    truncation, normalised when a ``Normalize`` module follows."""
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules(folder)]
    other = [kind for kind in kinds if kind not in ("StaticEmbedding", "Normalize")]
    if other:
        raise ModelFormatError(f"{folder}: modules {', '.join(other)} after StaticEmbedding are unsupported")
    truncation = tokenizer.truncation
    if truncation is not None and truncation.get("direction", "right") != "right":
        raise ModelFormatError(f"{folder}: the tokenizer truncates on the left, which is not supported")
    max_tokens = None if truncation is None else int(truncation["max_length"])
    return TokenRules(False, max_tokens, None), "Normalize" in kinds


def _read(folder: Path, tensor_dir: Path, source: str) -> StaticModel:
    tokenizer = read_tokenizer(tensor_dir / "tokenizer.json")
    matrix, scales = _matrix(tensor_dir / "model.safetensors")
    by_id = sorted(tokenizer.get_vocab(with_added_tokens=True).items(), key=lambda item: item[1])
    vocab = [token for token, _ in by_id]
    if len(vocab) != len(matrix) or [i for _, i in by_id] != list(range(len(vocab))):
        raise ModelFormatError(
            f"{folder}: tokenizer has {len(vocab)} tokens but the matrix has {len(matrix)} rows"
        )
    config = read_json(folder / "config.json") if (folder / "config.json").is_file() else {}
    extra = config.get("staticsem_metadata") or {}
    if not isinstance(extra, dict):
        raise ModelFormatError(f"{folder / 'config.json'}: 'staticsem_metadata' must be a JSON object")
    metadata = {"source": str(folder), "imported_from": source, **extra}
    subword = folder / SUBWORD_FILE
    if subword.is_file() or ("staticsem_metadata" in config and not config.get(TOKEN_LEVEL)):
        return _read_our_words(folder, vocab, matrix, tokenizer, metadata)
    if source == "model2vec":
        rules, normalize = _model2vec_rules(config, vocab)
    else:
        rules, normalize = _sentence_transformers_rules(folder, tokenizer)
    with naming(folder):
        return StaticModel(
            vocab,
            np.ascontiguousarray(matrix),
            scales=scales,
            tokenizer=tokenizer,
            metadata=metadata,
            tokens=rules,
            normalize=normalize,
        )


def _read_our_words(
    folder: Path, vocab: list[str], matrix: np.ndarray, tokenizer: Tokenizer, metadata: dict[str, Any]
) -> StaticModel:
    """Our own word-level export, read back as it was: the zero ``[UNK]`` row dropped, our subword
    tokenizer as the unknown-word fallback."""
    keep = [i for i, token in enumerate(vocab) if token]
    unk = getattr(tokenizer.model, "unk_token", None)
    if isinstance(tokenizer.model, models.WordLevel) and unk in tokenizer.get_vocab():
        row = tokenizer.token_to_id(unk)
        if not np.any(matrix[row]):
            keep.remove(row)  # the zero row our exports append
    subword = folder / SUBWORD_FILE
    fallback = read_tokenizer(subword) if subword.is_file() else tokenizer
    matrix = dequantize(matrix, None) if matrix.dtype == np.int8 else matrix
    with naming(folder):
        rows = np.ascontiguousarray(matrix[keep])
        return StaticModel([vocab[i] for i in keep], rows, tokenizer=fallback, metadata=metadata)


def read_model2vec(path: Path) -> StaticModel:
    """Read a model2vec folder (vocabulary-quantised ones included)."""
    return _read(path, path, "model2vec")


def read_sentence_transformers(path: Path) -> StaticModel:
    """Read a sentence-transformers folder whose first module is a StaticEmbedding."""
    module = static_module_path(path)
    if module is None:
        raise ModelFormatError(f"{path}: no modules.json, not a sentence-transformers folder")
    return _read(path, module, "sentence-transformers")


def word_tokenizer(vocab: list[str]) -> Tokenizer:
    """A word-level tokenizer reproducing our splitting; ``[UNK]`` gets id ``len(vocab)``."""
    tokenizer = Tokenizer(
        models.WordLevel({**{w: i for i, w in enumerate(vocab)}, UNK: len(vocab)}, unk_token=UNK)
    )
    if all(w == w.lower() for w in vocab):
        tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


def _export_pieces(model: StaticModel, format_name: str, drops_unknown: bool) -> tuple[Tokenizer, np.ndarray]:
    """The tokenizer and matrix to write: a token-level model's own, else a word-level tokenizer over our
    vocabulary and a zero ``[UNK]`` row."""
    warn_dropped_ngrams(model, format_name)
    matrix = dequantize(model.vectors, model.scales)
    if model.tokens is not None and model.tokenizer is not None:
        if model.tokens.drop_unknown != drops_unknown:
            logger.warning(
                "%s %s the unknown token's row, unlike the library this model was imported from",
                format_name,
                "drops" if drops_unknown else "averages",
            )
        tokenizer = Tokenizer.from_str(model.tokenizer.to_str())
        if model.tokens.max_tokens is None:
            tokenizer.no_truncation()
        else:
            tokenizer.enable_truncation(model.tokens.max_tokens)
        return tokenizer, matrix
    if UNK in model:
        raise ModelFormatError(f"the vocabulary holds {UNK!r}, which the export needs for unknown words")
    return word_tokenizer(model.vocab), np.vstack([matrix, np.zeros((1, model.dim), np.float32)])


def _write_common(model: StaticModel, tmp: Path, tokenizer: Tokenizer, types: tuple[str, str, str]) -> None:
    """tokenizer.json, our subword tokenizer beside a word-level export, modules.json and 1_Normalize.

    :param types: the StaticEmbedding module's path and type, and the Normalize module's type.
    """
    tokenizer.save(str(tmp / "tokenizer.json"))
    if model.tokenizer is not None and model.tokens is None:
        model.tokenizer.save(str(tmp / SUBWORD_FILE))
    static_path, static_type, normalize_type = types
    modules = [{"idx": 0, "name": "0", "path": static_path, "type": static_type}]
    if model.normalize:
        (tmp / "1_Normalize").mkdir()
        _dump(tmp / "1_Normalize" / "config.json", {})
        modules.append({"idx": 1, "name": "1", "path": "1_Normalize", "type": normalize_type})
    _dump(tmp / "modules.json", modules)


def _dump(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")


def _our_config(model: StaticModel) -> dict[str, Any]:
    """What a reader needs to tell our exports apart (and read a word-level one back losslessly)."""
    return {"staticsem_metadata": model.metadata, **({TOKEN_LEVEL: True} if model.tokens else {})}


def write_model2vec(model: StaticModel, path: Path) -> Path:
    """Write a folder that ``model2vec.StaticModel.from_pretrained`` (and sentence-transformers) load."""
    tokenizer, matrix = _export_pieces(model, "model2vec", drops_unknown=True)
    config = {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "tokenizer_name": model.metadata.get("teacher"),
        "apply_pca": model.dim,
        "hidden_dim": model.dim,
        "seq_length": 1_000_000,
        "normalize": model.normalize,
        "embedding_dtype": "float32",
        **({"max_length": model.tokens.max_tokens} if model.tokens else {}),
        **_our_config(model),
    }
    with atomic_folder(path) as tmp:
        write_tensors(tmp / "model.safetensors", {"embeddings": matrix})
        _write_common(model, tmp, tokenizer, _M2V_MODULES)
        _dump(tmp / "config.json", config)
    return path


def write_sentence_transformers(model: StaticModel, path: Path) -> Path:
    """Write a sentence-transformers folder: StaticEmbedding (mean) + Normalize."""
    tokenizer, matrix = _export_pieces(model, "sentence-transformers", drops_unknown=False)
    with atomic_folder(path) as tmp:
        write_tensors(tmp / "model.safetensors", {"embedding.weight": matrix})
        _write_common(model, tmp, tokenizer, ("", _ST_STATIC, _ST_NORMALIZE))
        _dump(tmp / "config.json", _our_config(model))
        _dump(
            tmp / "config_sentence_transformers.json",
            {
                "model_type": "SentenceTransformer",
                "prompts": {},
                "default_prompt_name": None,
                "similarity_fn_name": "cosine",
            },
        )
    return path
