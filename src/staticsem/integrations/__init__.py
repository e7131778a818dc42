"""staticsem inside the frameworks people build with: one small module per framework, each its own extra.

* ``staticsem.integrations.langchain.StaticsemEmbeddings`` — LangChain ``Embeddings`` (``[langchain]``)
* ``staticsem.integrations.llamaindex.StaticsemEmbedding`` — LlamaIndex ``BaseEmbedding`` (``[llamaindex]``)
* ``staticsem.integrations.haystack.StaticsemTextEmbedder`` / ``StaticsemDocumentEmbedder`` — Haystack
  components (``[haystack]``)
* ``staticsem.integrations.chroma.StaticsemEmbeddingFunction`` — a Chroma ``EmbeddingFunction`` (``[chroma]``)

Each takes a model path (any format ``staticsem.load`` reads) or a loaded ``StaticModel`` and returns
exactly the model's rows: ``encode_query``'s for the framework's queries, ``encode_document``'s for what it
stores (both ``encode``'s for a model without modes, ``staticsem.modes``). This package imports no
framework; each module imports only its own.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

from staticsem.model import StaticModel


def resolve_model(model: StaticModel | str | Path) -> StaticModel:
    """``model`` itself, or the model loaded from a path."""
    if isinstance(model, StaticModel):
        return model
    from staticsem.io import load

    return load(Path(model))


def require(module: str, extra: str) -> ModuleType:
    """Import a framework module, or fail with the pip line that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{exc}: this integration needs `pip install 'staticsem[{extra}]'`") from None
