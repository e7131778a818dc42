"""model2vec and sentence-transformers static folders, read and written with numpy + tokenizers only.

Export builds a word-level HF tokenizer over our vocabulary (BERT pre-tokeniser, plus a lower-case
normaliser when every word is lower-case) and appends a zero ``[UNK]`` row: model2vec drops unknown
ids and sentence-transformers' mean over a zero row keeps the direction, so both give our vectors on
in-vocabulary text. What they cannot reproduce: the lower-case retry for cased vocabularies and the
subword-prefix fallback for unknown words (they skip such words). Our own subword tokenizer is kept
beside the export as ``staticsem_subword_tokenizer.json`` so that reading the folder back is lossless.
A fastText model's n-gram table is not exported (a warning says so).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from staticsem.errors import ModelFormatError
from staticsem.io.atomic import atomic_folder
from staticsem.io.common import naming, read_json, read_safetensors, read_tokenizer, warn_dropped_ngrams
from staticsem.quantize import dequantize

if TYPE_CHECKING:
    from staticsem.model import StaticModel

UNK = "[UNK]"
SUBWORD_FILE = "staticsem_subword_tokenizer.json"
_ST_STATIC = "sentence_transformers.sentence_transformer.modules.static_embedding.StaticEmbedding"
_ST_NORMALIZE = "sentence_transformers.base.modules.normalize.Normalize"


def is_model2vec(path: Path) -> bool:
    """A model2vec folder: ``config.json`` + ``model.safetensors`` + ``tokenizer.json``."""
    return all((path / name).is_file() for name in ("config.json", "model.safetensors", "tokenizer.json"))


def static_module_path(path: Path) -> Path | None:
    """The folder of the StaticEmbedding module of a sentence-transformers folder, if it has one."""
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return None
    modules = read_json(modules_file, expect=list)
    for module in modules:
        if isinstance(module, dict) and str(module.get("type", "")).endswith("StaticEmbedding"):
            return path / str(module.get("path", "")).strip("./")
    kinds = ", ".join(str(m.get("type", "?")).rsplit(".", 1)[-1] for m in modules if isinstance(m, dict))
    raise ModelFormatError(
        f"{path}: a Sentence Transformer without a static embedding ({kinds}); "
        "make a static model from it with `staticsem distill --teacher`"
    )


def _read(folder: Path, tensor_dir: Path, source: str) -> StaticModel:
    from staticsem.model import StaticModel

    tokenizer = read_tokenizer(tensor_dir / "tokenizer.json")
    tensors = read_safetensors(tensor_dir / "model.safetensors")
    matrix = tensors.get("embedding.weight", tensors.get("embeddings"))
    if matrix is None:
        raise ModelFormatError(
            f"{tensor_dir / 'model.safetensors'}: no 'embeddings' or 'embedding.weight' tensor"
        )
    if "mapping" in tensors:
        matrix = matrix[tensors["mapping"]]
    if "weights" in tensors:
        matrix = matrix.astype(np.float32) * tensors["weights"][:, None]
    if matrix.dtype not in (np.float32, np.float16):
        matrix = matrix.astype(np.float32)  # model2vec also stores float64, and int8 with one unsaved scale
    by_id = sorted(tokenizer.get_vocab(with_added_tokens=True).items(), key=lambda item: item[1])
    vocab = [token for token, _ in by_id]
    if len(vocab) != len(matrix) or [i for _, i in by_id] != list(range(len(vocab))):
        raise ModelFormatError(
            f"{folder}: tokenizer has {len(vocab)} tokens but the matrix has {len(matrix)} rows"
        )
    subword = folder / SUBWORD_FILE
    keep = [i for i, token in enumerate(vocab) if token]
    unk = getattr(tokenizer.model, "unk_token", None)
    if isinstance(tokenizer.model, models.WordLevel) and unk in tokenizer.get_vocab():
        row = tokenizer.token_to_id(unk)
        if not np.any(matrix[row]):
            keep.remove(row)  # the zero row our exports append
    config = read_json(folder / "config.json") if (folder / "config.json").is_file() else {}
    extra = config.get("staticsem_metadata") or {}
    if not isinstance(extra, dict):
        raise ModelFormatError(f"{folder / 'config.json'}: 'staticsem_metadata' must be a JSON object")
    fallback = read_tokenizer(subword) if subword.is_file() else tokenizer
    with naming(folder):
        return StaticModel(
            [vocab[i] for i in keep],
            np.ascontiguousarray(matrix[keep]),
            tokenizer=fallback,
            metadata={"source": str(folder), "imported_from": source, **extra},
        )


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


def _export_pieces(model: StaticModel, format_name: str) -> tuple[Tokenizer, np.ndarray]:
    if UNK in model:
        raise ModelFormatError(f"the vocabulary holds {UNK!r}, which the export needs for unknown words")
    warn_dropped_ngrams(model, format_name)
    matrix = dequantize(model.vectors, model.scales)
    return word_tokenizer(model.vocab), np.vstack([matrix, np.zeros((1, model.dim), np.float32)])


def _write_common(model: StaticModel, tmp: Path, tokenizer: Tokenizer, module_dir: Path) -> None:
    module_dir.mkdir(exist_ok=True)
    tokenizer.save(str(module_dir / "tokenizer.json"))
    if model.tokenizer is not None:
        model.tokenizer.save(str(tmp / SUBWORD_FILE))
    (tmp / "1_Normalize").mkdir()
    _dump(tmp / "1_Normalize" / "config.json", {})


def _dump(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")


def write_model2vec(model: StaticModel, path: Path) -> Path:
    """Write a folder that ``model2vec.StaticModel.from_pretrained`` (and sentence-transformers) load."""
    tokenizer, matrix = _export_pieces(model, "model2vec")
    config = {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "tokenizer_name": model.metadata.get("teacher"),
        "apply_pca": model.dim,
        "hidden_dim": model.dim,
        "seq_length": 1_000_000,
        "normalize": True,
        "embedding_dtype": "float32",
        "staticsem_metadata": model.metadata,
    }
    with atomic_folder(path) as tmp:
        save_file({"embeddings": matrix}, str(tmp / "model.safetensors"))
        _write_common(model, tmp, tokenizer, tmp)
        _dump(tmp / "config.json", config)
        _dump(
            tmp / "modules.json",
            [
                {"idx": 0, "name": "0", "path": ".", "type": "sentence_transformers.models.StaticEmbedding"},
                {
                    "idx": 1,
                    "name": "1",
                    "path": "1_Normalize",
                    "type": "sentence_transformers.models.Normalize",
                },
            ],
        )
    return path


def write_sentence_transformers(model: StaticModel, path: Path) -> Path:
    """Write a sentence-transformers folder: StaticEmbedding (mean) + Normalize."""
    tokenizer, matrix = _export_pieces(model, "sentence-transformers")
    with atomic_folder(path) as tmp:
        save_file({"embedding.weight": matrix}, str(tmp / "model.safetensors"))
        _write_common(model, tmp, tokenizer, tmp)
        _dump(tmp / "config.json", {"staticsem_metadata": model.metadata})
        _dump(
            tmp / "config_sentence_transformers.json",
            {
                "model_type": "SentenceTransformer",
                "prompts": {},
                "default_prompt_name": None,
                "similarity_fn_name": "cosine",
            },
        )
        _dump(
            tmp / "modules.json",
            [
                {"idx": 0, "name": "0", "path": "", "type": _ST_STATIC},
                {"idx": 1, "name": "1", "path": "1_Normalize", "type": _ST_NORMALIZE},
            ],
        )
    return path
