"""Chroma: ``StaticsemEmbeddingFunction``, an ``EmbeddingFunction`` for collections.

>>> import chromadb
>>> from staticsem.integrations.chroma import StaticsemEmbeddingFunction
>>> collection = chromadb.Client().create_collection(
...     "docs", embedding_function=StaticsemEmbeddingFunction("models/demo"))

Built from a path, it is registered under the name ``staticsem``, so a persisted collection finds it
again. Needs ``pip install 'staticsem[chroma]'`` (chromadb).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from staticsem.integrations import require, resolve_model
from staticsem.model import StaticModel

_types = require("chromadb.api.types", "chroma")
_registry = require("chromadb.utils.embedding_functions", "chroma")


@_registry.register_embedding_function
class StaticsemEmbeddingFunction(_types.EmbeddingFunction):  # type: ignore[misc, name-defined]
    """Chroma embeddings from a staticsem model: one float32 row per text, L2-normalised; documents by
    ``encode_document``, query texts (``embed_query``) by ``encode_query``.

    :param model: a model path or a loaded ``StaticModel``.
    """

    def __init__(self, model: StaticModel | str | Path) -> None:
        self.model_path = None if isinstance(model, StaticModel) else str(model)
        self.model = resolve_model(model)

    def __call__(self, input: list[str]) -> list[np.ndarray]:
        return list(self.model.encode_document(list(input)))

    def embed_query(self, input: list[str]) -> list[np.ndarray]:
        return list(self.model.encode_query(list(input)))

    @staticmethod
    def name() -> str:
        return "staticsem"

    def default_space(self) -> str:
        return "cosine"

    def get_config(self) -> dict[str, Any]:
        return {"model": self.model_path}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> StaticsemEmbeddingFunction:
        if not config.get("model"):
            raise ValueError("this collection's staticsem model was passed as an object; pass its path")
        return StaticsemEmbeddingFunction(config["model"])
