"""``POST /classify``: the served classifier's label and per-class scores for each text.

Enabled when the served folder is a classifier (``staticsem train-classifier``); otherwise it answers 404.
Runs on the model thread like the embeddings (numpy only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from staticsem.serve.guard import ApiError
from staticsem.serve.schemas import ErrorResponse, Text, Texts
from staticsem.serve.service import Service
from staticsem.serve.worker import ModelWorker

if TYPE_CHECKING:
    from staticsem.train import StaticClassifier

router = APIRouter()


class ClassifyRequest(BaseModel):
    input: Text | Annotated[Texts, Field(min_length=1)] = Field(description="One text or a list of texts.")


class Classification(BaseModel):
    index: int
    label: str | list[str] = Field(
        description="The predicted label (multi-label: the labels over the threshold)."
    )
    scores: dict[str, float] = Field(description="Each class's probability.")


class ClassifyResponse(BaseModel):
    object: str = "list"
    data: list[Classification]
    classes: list[str]


async def _parts(request: Request) -> tuple[Service, ModelWorker, StaticClassifier]:
    classifier = getattr(request.app.state, "classifier", None)
    if classifier is None:
        raise ApiError(
            404, "no classifier is served: serve a folder written by train-classifier", "not_found"
        )
    return request.app.state.service, request.app.state.worker, classifier


def _classify(service: Service, classifier: StaticClassifier, texts: list[str]) -> dict[str, Any]:
    service.check_texts(texts)
    found = classifier.classify(texts)
    data = [{"index": i, **prediction.to_dict()} for i, prediction in enumerate(found)]
    return {"object": "list", "data": data, "classes": classifier.classes}


@router.post(
    "/classify",
    response_model=ClassifyResponse,
    responses={status: {"model": ErrorResponse} for status in (400, 404, 413, 415, 422, 500)},
    tags=["classify"],
)
async def classify(
    request: ClassifyRequest,
    parts: Annotated[tuple[Service, ModelWorker, Any], Depends(_parts)],
) -> dict[str, Any]:
    """Label each text with the served classifier (softmax scores; multi-label: sigmoid and a threshold)."""
    service, worker, classifier = parts
    texts = [request.input] if isinstance(request.input, str) else request.input
    return await worker.run(_classify, service, classifier, texts)
