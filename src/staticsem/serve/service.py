"""What the endpoints do, without HTTP: limits checked, then the same model and index calls the CLI makes.

Methods are synchronous (the routes run them off the event loop: ``app.py`` says where) and raise
``ApiError`` for requests they refuse.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from staticsem.errors import InputError
from staticsem.model import StaticModel
from staticsem.modes import encoder_for
from staticsem.serve import schemas
from staticsem.serve.guard import ApiError, LimitError
from staticsem.serve.settings import Limits
from staticsem.text import word_count
from staticsem.version import __version__

if TYPE_CHECKING:
    from staticsem.search import Index


class Encoder(Protocol):
    """Anything that turns texts into L2-normalised rows (a ``StaticModel``, or a wrapped teacher)."""

    @property
    def dim(self) -> int: ...

    def encode(self, texts: list[str]) -> np.ndarray: ...


class Service:
    """A model (and optional index) behind the request limits."""

    def __init__(
        self,
        model: Encoder,
        name: str,
        limits: Limits,
        index: Index | None = None,
        api_key: str | None = None,
    ) -> None:
        self.model, self.name, self.limits, self.index, self.api_key = model, name, limits, index, api_key

    # ---------------------------------------------------------------- checks
    def check_texts(self, texts: Sequence[str], what: str = "inputs") -> None:
        """Count and length limits for one request's texts."""
        if len(texts) > self.limits.max_inputs:
            raise LimitError("max_inputs", f"{len(texts):,} {what}, over {self.limits.max_inputs:,}")
        longest = max((len(t) for t in texts), default=0)
        if longest > self.limits.max_chars:
            at = next(i for i, t in enumerate(texts) if len(t) == longest)
            raise LimitError(
                "max_chars", f"{what}[{at}] has {longest:,} characters, over {self.limits.max_chars:,}"
            )

    def check_k(self, k: int) -> None:
        if k > self.limits.max_k:
            raise LimitError("max_k", f"k is {k:,}, over {self.limits.max_k:,}")

    def _static(self) -> StaticModel:
        if not isinstance(self.model, StaticModel):
            raise ApiError(
                404, "the served model has no vocabulary (word endpoints need a static model)", "not_found"
            )
        return self.model

    def _index(self) -> Index:
        if self.index is None:
            raise ApiError(404, "no index is served: start the server with --index PATH", "not_found")
        return self.index

    # ---------------------------------------------------------------- embeddings and similarity
    def embeddings(self, request: schemas.EmbeddingRequest) -> dict[str, Any]:
        """The OpenAI embeddings answer as a plain dict (numpy rows, serialised by orjson)."""
        texts = [request.input] if isinstance(request.input, str) else request.input
        if not texts:
            raise ApiError(422, "body.input: the list of inputs is empty")
        self.check_texts(texts)
        vectors = encoder_for(self.model, request.input_type)(texts)
        if request.dimensions is not None:
            vectors = self._truncate(vectors, request.dimensions)
        if request.encoding_format == "base64":
            rows: list[Any] = [
                base64.b64encode(row.astype("<f4").tobytes()).decode("ascii") for row in vectors
            ]
        else:
            rows = list(vectors)
        tokens = sum(word_count(t) for t in texts)
        return {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)],
            "model": self.name,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def _truncate(self, vectors: np.ndarray, dims: int) -> np.ndarray:
        if dims > self.model.dim:
            raise ApiError(422, f"body.dimensions: {dims} is more than the model's {self.model.dim}")
        cut = np.ascontiguousarray(vectors[:, :dims])
        norms = np.linalg.norm(cut, axis=1, keepdims=True)
        return cut / np.maximum(norms, np.finfo(np.float32).tiny)

    def similarity(self, request: schemas.PairsRequest | schemas.MatrixRequest) -> dict[str, Any]:
        if isinstance(request, schemas.PairsRequest):
            firsts, seconds = [a for a, _ in request.pairs], [b for _, b in request.pairs]
            for side in (firsts, seconds):  # max_inputs counts pairs
                self.check_texts(side, "pairs")
            a, b = self.model.encode(firsts), self.model.encode(seconds)
            return {"scores": np.clip(np.einsum("ij,ij->i", a, b), -1.0, 1.0), "matrix": None}
        texts, others = request.texts, request.others
        self.check_texts(texts, "texts")
        self.check_texts(others or [], "others")
        columns = len(texts if others is None else others)
        if len(texts) * columns > self.limits.max_matrix_cells:
            cells = f"a {len(texts)} × {columns} matrix, over {self.limits.max_matrix_cells:,} cells"
            raise LimitError("max_matrix_cells", cells)
        rows = self.model.encode(texts)
        matrix = rows @ (rows if others is None else self.model.encode(others)).T
        return {"scores": None, "matrix": np.clip(matrix, -1.0, 1.0)}

    # ---------------------------------------------------------------- words
    def neighbors(self, word: str, k: int) -> schemas.NeighborsResponse:
        self.check_texts([word], "word")
        self.check_k(k)
        model = self._static()
        try:
            found = model.most_similar(word, k)
        except InputError as exc:
            raise ApiError(404, str(exc), "not_found") from None
        return schemas.NeighborsResponse(word=word, neighbors=_scores(found))

    def analogy(self, request: schemas.AnalogyRequest) -> schemas.AnalogyResponse:
        self.check_texts([request.a, request.b, request.c], "words")
        self.check_k(request.k)
        model = self._static()
        try:
            found = model.analogy(request.a, request.b, request.c, request.k)
        except InputError as exc:
            raise ApiError(404, str(exc), "not_found") from None
        return schemas.AnalogyResponse(answers=_scores(found))

    # ---------------------------------------------------------------- index
    def search(self, request: schemas.SearchRequest) -> schemas.SearchResponse:
        self.check_texts([request.query, *(request.where or {}).values()], "query")
        self.check_k(request.k)
        hits = self._index().search(request.query, request.k, mode=request.mode, where=request.where)
        return schemas.SearchResponse(hits=[schemas.Hit(**hit.to_dict()) for hit in hits])

    def add(self, request: schemas.DocumentsRequest) -> schemas.DocumentsResponse:
        index = self._index()
        self.check_texts([doc.text for doc in request.documents], "documents")
        for at, doc in enumerate(request.documents):
            strings = [value for value in doc.metadata.values() if isinstance(value, str)]
            self.check_texts([doc.id or "", *strings], f"documents[{at}].id/metadata")
        docs = []
        for at, doc in enumerate(request.documents):
            clash = {"text", "id"} & doc.metadata.keys()
            if clash:
                raise ApiError(422, f"body.documents.{at}.metadata: key {sorted(clash)[0]!r} is reserved")
            docs.append({"text": doc.text, **({} if doc.id is None else {"id": doc.id}), **doc.metadata})
        try:
            changed = index.add(docs, upsert=request.upsert)
        except InputError as exc:
            if "duplicate document id" in str(exc):  # the index's one error for an id it already has
                raise ApiError(409, str(exc), "conflict") from None
            raise
        return schemas.DocumentsResponse(changed=changed, documents=len(index))

    def delete(self, doc_id: str) -> schemas.DocumentsResponse:
        index = self._index()
        try:
            changed = index.delete([doc_id])
        except InputError as exc:
            raise ApiError(404, str(exc), "not_found") from None
        return schemas.DocumentsResponse(changed=changed, documents=len(index))

    def info(self) -> schemas.InfoResponse:
        model = self.model
        static = model if isinstance(model, StaticModel) else None
        return schemas.InfoResponse(
            model=self.name,
            version=__version__,
            dim=model.dim,
            words=None if static is None else len(static),
            dtype=None if static is None else static.dtype,
            metadata={} if static is None else _summary(static.metadata),
            limits=asdict(self.limits),
            index=None if self.index is None else self.index.info(),
            writes=self.api_key is not None and self.index is not None,
        )


def _scores(found: list[tuple[str, float]]) -> list[schemas.WordScore]:
    return [schemas.WordScore(word=word, score=score) for word, score in found]


def _summary(metadata: dict[str, Any]) -> dict[str, Any]:
    """Scalar metadata only (teacher, method, ...): the full record stays in the model's config.json."""
    return {key: value for key, value in metadata.items() if isinstance(value, (str, int, float, bool))}
