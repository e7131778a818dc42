"""Request and response models: they are the OpenAPI schema, so clients and schemathesis see exact types.

``/v1/embeddings`` follows the OpenAI embeddings API, so OpenAI client libraries work unchanged.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_unicode(text: str) -> str:
    """JSON can spell lone surrogates (``"\\ud800"``); no UTF-8 text holds them, so refuse them here."""
    if not text.isascii() and _SURROGATE.search(text):
        raise ValueError("text holds a lone surrogate (not valid Unicode)")
    return text


def limited(name: str) -> Any:
    """Mark a field with the limit that bounds it; ``document_limits`` writes the configured number."""
    return Field(json_schema_extra={"x-limit": name})


Text = Annotated[str, AfterValidator(_valid_unicode), limited("max_chars")]
Texts = Annotated[list[Text], limited("max_inputs")]


def _count(value: Any) -> Any:
    """A count is a JSON integer: 37 and 37.0 (JSON Schema's integer), never true or "37" (which pydantic
    would coerce)."""
    if isinstance(value, (bool, str)):
        raise ValueError("a count is an integer, not a boolean or a string")
    return value


Count = Annotated[int, Field(ge=1), BeforeValidator(_count)]
K = Annotated[Count, limited("max_k")]
MetadataValue = Text | int | float | bool | None
# What the index accepts as a metadata field name (staticsem.search: filterable with ``where``).
FieldName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$", max_length=128)]
# pydantic writes a key pattern as patternProperties; without this, other keys would look allowed.
ONLY_FIELD_NAMES = Field(json_schema_extra={"additionalProperties": False})


class ErrorBody(BaseModel):
    message: str = Field(description="What was wrong, in one line.")
    type: str = Field(description="invalid_request, limit_exceeded, unauthorized, not_found, ...")
    limit: str | None = Field(None, description="The limit that was exceeded (e.g. max_inputs), if any.")


class ErrorResponse(BaseModel):
    error: ErrorBody


# ---------------------------------------------------------------- embeddings (OpenAI)
class EmbeddingRequest(BaseModel):
    input: Text | Annotated[Texts, Field(min_length=1)] = Field(description="One text or a list of texts.")
    model: str | None = Field(None, description="Accepted for compatibility; the served model answers.")
    encoding_format: Literal["float", "base64"] = Field(
        "float", description="float: JSON numbers; base64: little-endian float32 bytes, base64-encoded."
    )
    dimensions: Annotated[Count, limited("dim")] | None = Field(
        None, description="Keep the first N dimensions (re-normalised); at most the model's."
    )
    input_type: Literal["query", "document", "search_query", "search_document"] | None = Field(
        None,
        description="Encode for retrieval: search queries as query, the texts searched as document (the "
        "model's modes; search_query and search_document are the same); none: symmetric, for similarity.",
    )
    user: str | None = None


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class Usage(BaseModel):
    prompt_tokens: int = Field(description="Words in the inputs.")
    total_tokens: int


class EmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: Usage


# ---------------------------------------------------------------- similarity and words
class PairsRequest(BaseModel):
    """One cosine per pair of texts."""

    model_config = ConfigDict(extra="forbid")

    pairs: Annotated[list[tuple[Text, Text]], limited("max_inputs")]


class MatrixRequest(BaseModel):
    """The cosine matrix of texts (rows) × others (columns; default: texts again)."""

    model_config = ConfigDict(extra="forbid")

    texts: Texts
    others: Texts | None = None


class SimilarityResponse(BaseModel):
    scores: list[float] | None = Field(None, description="Cosine of each pair.")
    matrix: list[list[float]] | None = Field(None, description="Cosine of texts[i] and others[j].")


class WordScore(BaseModel):
    word: str
    score: float


class NeighborsResponse(BaseModel):
    word: str
    neighbors: list[WordScore]


class AnalogyRequest(BaseModel):
    """a : b :: c : ?"""

    a: Text
    b: Text
    c: Text
    k: K = 5


class AnalogyResponse(BaseModel):
    answers: list[WordScore]


# ---------------------------------------------------------------- search index
class SearchRequest(BaseModel):
    query: Text
    k: K = 10
    mode: Literal["dense", "bm25", "hybrid"] = "hybrid"
    where: Annotated[dict[FieldName, Text], ONLY_FIELD_NAMES] | None = Field(
        None, description="Keep documents whose metadata has these values."
    )


class Hit(BaseModel):
    id: str
    score: float
    text: str
    metadata: dict[str, Any]


class SearchResponse(BaseModel):
    hits: list[Hit]


class DocumentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: Text
    id: Text | None = Field(None, description="Assigned by the index when missing.")
    metadata: Annotated[dict[FieldName, MetadataValue], ONLY_FIELD_NAMES] = Field(default_factory=dict)


class DocumentsRequest(BaseModel):
    documents: Annotated[list[DocumentIn], limited("max_inputs")]
    upsert: bool = Field(
        False, strict=True, description="Replace documents whose id exists instead of refusing."
    )


class DocumentsResponse(BaseModel):
    changed: int = Field(description="Documents added, replaced or deleted.")
    documents: int = Field(description="Documents in the index now.")


# ---------------------------------------------------------------- service
class HealthResponse(BaseModel):
    status: Literal["ok"] = "ok"


class InfoResponse(BaseModel):
    model: str
    version: str
    dim: int
    words: int | None = Field(None, description="Vocabulary size (static models).")
    dtype: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    limits: dict[str, int]
    index: dict[str, Any] | None = Field(None, description="The served index's info, if any.")
    writes: bool = Field(description="Whether /documents accepts requests (an API key is configured).")
