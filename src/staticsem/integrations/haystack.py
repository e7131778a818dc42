"""Haystack: ``StaticsemTextEmbedder`` (queries) and ``StaticsemDocumentEmbedder`` (documents) components.

>>> from staticsem.integrations.haystack import StaticsemDocumentEmbedder, StaticsemTextEmbedder
>>> pipeline.add_component("embedder", StaticsemTextEmbedder("models/demo"))

Both serialise with the pipeline when built from a path. Needs ``pip install 'staticsem[haystack]'``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from staticsem.integrations import require, resolve_model
from staticsem.model import StaticModel

_haystack = require("haystack", "haystack")
component = _haystack.component
Document = _haystack.Document


class _Encoder:
    """The model (loaded now, or at ``warm_up`` when given as a path) and what ``to_dict`` writes."""

    def __init__(self, model: StaticModel | str | Path) -> None:
        self.model_path = None if isinstance(model, StaticModel) else str(model)
        self._model = model if isinstance(model, StaticModel) else None

    def warm_up(self) -> None:
        if self._model is None:
            assert self.model_path is not None
            self._model = resolve_model(self.model_path)

    @property
    def model(self) -> StaticModel:
        self.warm_up()
        assert self._model is not None
        return self._model

    def to_dict(self) -> dict[str, Any]:
        if self.model_path is None:
            raise ValueError("a component built from a loaded StaticModel cannot be serialised; pass a path")
        return _haystack.default_to_dict(self, model=self.model_path)  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        return _haystack.default_from_dict(cls, data)


@component
class StaticsemTextEmbedder(_Encoder):
    """Embeds one text (a query, by ``encode_query``) as ``embedding``: a list of floats."""

    @component.output_types(embedding=list[float])  # type: ignore[misc]
    def run(self, text: str) -> dict[str, Any]:
        if not isinstance(text, str):
            raise TypeError(
                "StaticsemTextEmbedder expects a string; use StaticsemDocumentEmbedder for documents"
            )
        return {"embedding": self.model.encode_query([text])[0].tolist()}


@component
class StaticsemDocumentEmbedder(_Encoder):
    """Embeds documents' ``content`` (by ``encode_document``) and returns copies with ``embedding`` set
    (empty content: a zero row)."""

    @component.output_types(documents=list[Document])  # type: ignore[misc, valid-type]
    def run(self, documents: list[Any]) -> dict[str, Any]:
        vectors = self.model.encode_document([doc.content or "" for doc in documents])
        return {
            "documents": [
                replace(doc, embedding=row.tolist()) for doc, row in zip(documents, vectors, strict=True)
            ]
        }
