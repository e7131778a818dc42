"""What a folder or a name holds, read before any model is loaded: which model folder layout (staticsem's,
model2vec's or sentence-transformers'), a sentence-transformers folder's modules, and whether a name is a
Hugging Face hub repository id.

Nothing here imports the model, so the model card and the hub's uploads can use it and ``StaticModel``
can hand a push over to ``staticsem.io.hub`` without an import circle.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from staticsem.errors import ModelFormatError
from staticsem.io.common import read_json
from staticsem.io.native_write import FORMAT

FOLDER_FORMATS = ("staticsem", "model2vec", "sentence-transformers")  # ``Format`` values of folders
TOKEN_LEVEL = "staticsem_token_level"  # config.json flag of a token-level model's export
# owner/name as the hub spells it: letters, digits, '-', '_', '.'; no '--' or '..'; at most 96 characters each
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?"
_REPO_ID = re.compile(rf"{_PART}/{_PART}")


def is_hub_name(name: str | Path) -> bool:
    """True when ``name`` has the form of a hub repository id (``org/name``)."""
    text = str(name)
    return bool(_REPO_ID.fullmatch(text)) and ".." not in text and "--" not in text


def folder_format(path: Path) -> str:
    """Which of ``FOLDER_FORMATS`` the folder ``path`` holds.

    :raises ModelFormatError: for a folder of a transformer, or of nothing staticsem reads.
    """
    if (path / "config.json").is_file():
        read_json(path / "config.json")  # raises naming the file when it is not valid JSON
    if is_native(path):
        return "staticsem"
    if (path / "modules.json").is_file():
        static_module_path(path)  # raises for transformer models, even beside model2vec-like files
    if (path / "config_sentence_transformers.json").is_file() or (
        (path / "modules.json").is_file() and not is_model2vec(path)
    ):
        static_module_path(path)  # raises for transformer models
        return "sentence-transformers"
    if is_model2vec(path):
        return "model2vec"
    raise ModelFormatError(
        f"{path}: folder holds no model staticsem reads (no config.json/model.safetensors)"
    )


def is_native(path: Path) -> bool:
    """True when ``path`` is a folder in staticsem's own format (``native_write.save``)."""
    config = path / "config.json"
    if not (path.is_dir() and config.is_file()):
        return False
    try:
        return json.loads(config.read_text(encoding="utf-8")).get("format") == FORMAT
    except (ValueError, UnicodeDecodeError, AttributeError):
        return False


def is_model2vec(path: Path) -> bool:
    """A model2vec folder: ``config.json`` + ``model.safetensors`` + ``tokenizer.json``."""
    return all((path / name).is_file() for name in ("config.json", "model.safetensors", "tokenizer.json"))


def modules(path: Path) -> list[dict[str, Any]]:
    """The module entries of a sentence-transformers folder's modules.json."""
    return [m for m in read_json(path / "modules.json", expect=list) if isinstance(m, dict)]


def module_folder(path: Path, kind: str) -> str | None:
    """The folder, relative to ``path``, of a sentence-transformers folder's first module whose type ends
    with ``kind`` (``""``: ``path`` itself); None without modules.json or such a module."""
    if not (path / "modules.json").is_file():
        return None
    for module in modules(path):
        if str(module.get("type", "")).endswith(kind):
            return str(module.get("path", "")).strip("./")
    return None


def static_module_path(path: Path) -> Path | None:
    """The folder of the StaticEmbedding module of a sentence-transformers folder, if it has one."""
    if not (path / "modules.json").is_file():
        return None
    folder = module_folder(path, "StaticEmbedding")
    if folder is not None:
        return path / folder
    kinds = ", ".join(str(m.get("type", "?")).rsplit(".", 1)[-1] for m in modules(path))
    raise ModelFormatError(
        f"{path}: a Sentence Transformer without a static embedding ({kinds}); "
        "make a static model from it with `staticsem distill --teacher`"
    )
