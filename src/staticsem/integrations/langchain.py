"""LangChain: ``StaticsemEmbeddings``, an ``Embeddings`` for vector stores, retrievers and chains.

>>> from staticsem.integrations.langchain import StaticsemEmbeddings
>>> from langchain_core.vectorstores import InMemoryVectorStore
>>> store = InMemoryVectorStore(StaticsemEmbeddings("models/demo"))

Needs ``pip install 'staticsem[langchain]'`` (langchain-core).
"""

from __future__ import annotations

from pathlib import Path

from staticsem.integrations import require, resolve_model
from staticsem.model import StaticModel

_embeddings = require("langchain_core.embeddings", "langchain")


class StaticsemEmbeddings(_embeddings.Embeddings):  # type: ignore[misc, name-defined]
    """LangChain embeddings from a staticsem model: documents by ``encode_document``, queries by
    ``encode_query``.

    :param model: a model path or a loaded ``StaticModel``.
    :param batch_size: texts per vectorised encoding step.
    """

    def __init__(self, model: StaticModel | str | Path, batch_size: int = 4096) -> None:
        self.model = resolve_model(model)
        self.batch_size = batch_size

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors = self.model.encode_document(list(texts), batch_size=self.batch_size)
        return vectors.tolist()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        return self.model.encode_query([text])[0].tolist()  # type: ignore[no-any-return]

    # Encoding takes microseconds per text: running it inline is cheaper than a trip to a thread pool.
    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)
