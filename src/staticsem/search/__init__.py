"""Search over documents with a static model: a persistent dense (usearch HNSW) + BM25 (tantivy) index.

Needs the ``search`` extra (``pip install staticsem[search]``: usearch, tantivy, pyarrow). See
``staticsem.search.index``.
Names load on first use, so ``staticsem.search.cli`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "Document": "documents",
    "read_documents": "documents",
    "FusionSettings": "fusion",
    "Hit": "common",
    "Index": "index",
    "SearchMode": "common",
    "HnswSettings": "vectors",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module 'staticsem.search' has no attribute {name!r}")
    return getattr(importlib.import_module(f"staticsem.search.{_NAMES[name]}"), name)
