"""LlamaIndex: ``StaticsemEmbedding``, a ``BaseEmbedding`` for indexes, retrievers and query engines.

>>> from llama_index.core import Settings
>>> from staticsem.integrations.llamaindex import StaticsemEmbedding
>>> Settings.embed_model = StaticsemEmbedding("models/demo")

Needs ``pip install 'staticsem[llamaindex]'`` (llama-index-core).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from staticsem.integrations import require, resolve_model
from staticsem.model import StaticModel

_base = require("llama_index.core.base.embeddings.base", "llamaindex")
_pydantic = require("llama_index.core.bridge.pydantic", "llamaindex")


class StaticsemEmbedding(_base.BaseEmbedding):  # type: ignore[misc, name-defined]
    """LlamaIndex embeddings from a staticsem model: queries by ``encode_query``, the texts it indexes by
    ``encode_document``.

    :param model: a model path or a loaded ``StaticModel``.
    :param kwargs: ``BaseEmbedding`` fields (``embed_batch_size``, ``callback_manager``, ...).
    """

    _model: StaticModel = _pydantic.PrivateAttr()

    def __init__(self, model: StaticModel | str | Path, **kwargs: Any) -> None:
        name = kwargs.pop("model_name", "staticsem" if isinstance(model, StaticModel) else str(model))
        kwargs.setdefault("embed_batch_size", 1024)
        super().__init__(model_name=name, **kwargs)
        self._model = resolve_model(model)

    @classmethod
    def class_name(cls) -> str:
        return "StaticsemEmbedding"

    @property
    def model(self) -> StaticModel:
        return self._model

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._model.encode_query([query])[0].tolist()  # type: ignore[no-any-return]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._model.encode_document([text])[0].tolist()  # type: ignore[no-any-return]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._model.encode_document(list(texts)).tolist()  # type: ignore[no-any-return]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embedding(text)
