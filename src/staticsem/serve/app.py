"""The FastAPI app: request models in, ``Service`` calls off the event loop, response models out.

Calls that only use the model (embeddings, similarity, words) run on the app's one model thread
(``ModelWorker``). Index searches run on a pool of ``Limits.search_threads`` threads (one per core),
index writes on a thread of their own with in-flight slots of their own: two hundred searching
connections hold up a write by the time two searches take, not by the whole queue. The rest runs in
the thread pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from importlib import resources
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi_offline import FastAPIOffline

from staticsem.serve import schemas
from staticsem.serve.classify import router as classify_router
from staticsem.serve.guard import ApiError, BodyGuard, InFlight, install_error_handlers
from staticsem.serve.service import Encoder, Service
from staticsem.serve.settings import SETTINGS_ENV, Limits, ServeSettings
from staticsem.serve.worker import ModelWorker
from staticsem.version import __version__

logger = logging.getLogger(__name__)


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": schemas.ErrorResponse} for status in statuses}


# Every route can meet a bad body (400/413/415/422) and an unexpected failure (500).
COMMON = _errors(400, 404, 413, 415, 422, 500)
WRITE = _errors(400, 401, 403, 404, 409, 413, 415, 422, 500)

router = APIRouter()
bearer = HTTPBearer(auto_error=False, description="The key named by --api-key-env, as `Bearer KEY`.")


async def service(request: Request) -> Service:
    return request.app.state.service  # type: ignore[no-any-return]


ServiceDep = Annotated[Service, Depends(service)]


async def worker(request: Request) -> ModelWorker:
    return request.app.state.worker  # type: ignore[no-any-return]


WorkerDep = Annotated[ModelWorker, Depends(worker)]
WRITES = "/documents"  # the paths of the write lane


class IndexLanes:
    """Where index calls run: searches on ``threads`` threads, writes one at a time on their own thread.
    Like ``ModelWorker``, a lane closed at shutdown starts again on the next call."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._searches: ThreadPoolExecutor | None = None
        self.writes = ModelWorker("staticsem-writer")

    async def search(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._searches is None:
            self._searches = ThreadPoolExecutor(self.threads, thread_name_prefix="staticsem-search")
        return await asyncio.get_running_loop().run_in_executor(self._searches, fn, *args)

    def close(self) -> None:
        self.writes.stop()
        searches, self._searches = self._searches, None
        if searches is not None:
            searches.shutdown(wait=True)


async def lanes(request: Request) -> IndexLanes:
    return request.app.state.lanes  # type: ignore[no-any-return]


LanesDep = Annotated[IndexLanes, Depends(lanes)]


async def require_key(
    svc: ServiceDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> None:
    """Write endpoints: refused unless the server has a key and the request carries it."""
    if svc.api_key is None:
        raise ApiError(403, "writes are disabled: start the server with --api-key-env NAME", "forbidden")
    given = "" if credentials is None else credentials.credentials
    if not secrets.compare_digest(given.encode(), svc.api_key.encode()):
        raise ApiError(401, "missing or wrong API key (send Authorization: Bearer KEY)", "unauthorized")


def _json(payload: dict[str, Any]) -> Response:
    """Numpy-heavy answers serialised by orjson (float32 rows without a Python list in between)."""
    body = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)
    return Response(body, media_type="application/json")


@router.post(
    "/v1/embeddings", response_model=schemas.EmbeddingResponse, responses=COMMON, tags=["embeddings"]
)
async def embeddings(request: schemas.EmbeddingRequest, svc: ServiceDep, work: WorkerDep) -> Response:
    """Embed one text or a list (the OpenAI embeddings API)."""
    return _json(await work.run(svc.embeddings, request))


@router.post("/similarity", response_model=schemas.SimilarityResponse, responses=COMMON, tags=["embeddings"])
async def similarity(
    request: schemas.PairsRequest | schemas.MatrixRequest, svc: ServiceDep, work: WorkerDep
) -> Response:
    """Cosine similarity of text pairs, or the matrix of texts × others."""
    return _json(await work.run(svc.similarity, request))


@router.get("/neighbors", responses=COMMON, tags=["words"])
async def neighbors(
    svc: ServiceDep,
    work: WorkerDep,
    word: Annotated[str, Query(min_length=1, json_schema_extra={"x-limit": "max_chars"})],
    k: Annotated[int, Query(ge=1, json_schema_extra={"x-limit": "max_k"})] = 10,
) -> schemas.NeighborsResponse:
    """The k vocabulary words closest to a word."""
    return await work.run(svc.neighbors, word, k)


@router.post("/analogy", responses=COMMON, tags=["words"])
async def analogy(
    request: schemas.AnalogyRequest, svc: ServiceDep, work: WorkerDep
) -> schemas.AnalogyResponse:
    """a : b :: c : ? by 3CosAdd."""
    return await work.run(svc.analogy, request)


@router.post("/search", responses=COMMON, tags=["index"])
async def search(request: schemas.SearchRequest, svc: ServiceDep, lane: LanesDep) -> schemas.SearchResponse:
    """Search the served index (dense, bm25 or hybrid), optionally filtered by metadata."""
    return await lane.search(svc.search, request)  # type: ignore[no-any-return]


@router.post(WRITES, responses=WRITE, tags=["index"], dependencies=[Depends(require_key)])
async def add_documents(
    request: schemas.DocumentsRequest, svc: ServiceDep, lane: LanesDep
) -> schemas.DocumentsResponse:
    """Add (or with upsert, replace) documents in the served index. Needs the API key."""
    return await lane.writes.run(svc.add, request)


@router.delete(WRITES + "/{doc_id}", responses=WRITE, tags=["index"], dependencies=[Depends(require_key)])
async def delete_document(doc_id: str, svc: ServiceDep, lane: LanesDep) -> schemas.DocumentsResponse:
    """Delete one document from the served index. Needs the API key."""
    return await lane.writes.run(svc.delete, doc_id)


@router.get("/health", responses=_errors(500), tags=["service"])
async def health() -> schemas.HealthResponse:
    return schemas.HealthResponse()


@router.get("/info", responses=_errors(500), tags=["service"])
def info(svc: ServiceDep) -> schemas.InfoResponse:
    """The served model, the index, the limits."""
    return svc.info()


@router.get("/", include_in_schema=False)
async def playground() -> HTMLResponse:
    """The browser playground (one offline HTML page)."""
    page = resources.files("staticsem.serve").joinpath("playground.html").read_text(encoding="utf-8")
    return HTMLResponse(page)


def create_app(
    model: Encoder,
    *,
    name: str = "staticsem",
    index: Any = None,
    limits: Limits | None = None,
    api_key: str | None = None,
    close_index: bool = False,
    classifier: Any = None,
) -> FastAPI:
    """The server for ``model`` (and ``index``, a ``staticsem.search.Index``) under ``limits``.

    ``api_key`` enables the write endpoints; without it they answer 403. ``close_index`` closes the
    index when the app shuts down (for an index the app opened itself). ``classifier`` (a
    ``staticsem.train.StaticClassifier``) enables ``/classify``.
    """
    limits = limits or Limits()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.worker.start()
        yield
        app.state.worker.stop()  # after uvicorn let the in-flight requests finish
        app.state.lanes.close()
        if close_index and index is not None:
            index.close()

    app = FastAPIOffline(
        lifespan=lifespan,
        title="staticsem",
        version=__version__,
        description="Static sentence embeddings: OpenAI-compatible embeddings, similarity, words, search.",
    )
    app.state.service = Service(model, name, limits, index=index, api_key=api_key)
    app.state.worker = ModelWorker()
    app.state.lanes = IndexLanes(limits.search_threads)
    app.state.classifier = classifier
    bounds = {**asdict(limits), "dim": model.dim}
    generate = app.openapi
    app.openapi = lambda: _with_limits(generate(), bounds)  # type: ignore[method-assign]
    install_error_handlers(app)
    app.include_router(router)
    app.include_router(classify_router)
    json_routes = frozenset(
        (method, route.path)
        for route in [*router.routes, *classify_router.routes]
        if isinstance(route, APIRoute) and route.body_field
        for method in route.methods or ()
    )
    # inside BodyGuard: bodies read first
    app.add_middleware(InFlight, limit=limits.max_in_flight, own_lane=(WRITES,))
    app.add_middleware(BodyGuard, max_bytes=limits.max_body_bytes, json_routes=json_routes)
    return app


_BOUND_KEYWORD = {"string": "maxLength", "array": "maxItems", "integer": "maximum"}


def _with_limits(node: Any, bounds: dict[str, int]) -> Any:
    """Write the configured limits where fields carry ``x-limit`` (so clients and fuzzers see them)."""
    if isinstance(node, dict):
        name, kind = node.get("x-limit"), node.get("type")
        if name in bounds and kind in _BOUND_KEYWORD:
            node[_BOUND_KEYWORD[kind]] = bounds[name]
        for value in node.values():
            _with_limits(value, bounds)
    elif isinstance(node, list):
        for value in node:
            _with_limits(value, bounds)
    return node


def app_from_settings(settings: ServeSettings) -> FastAPI:
    """Load the model (and open the index) named by ``settings`` and build the app."""
    from staticsem.io import load
    from staticsem.train import StaticClassifier, is_classifier

    classifier = StaticClassifier.load(settings.model) if is_classifier(settings.model) else None
    model = load(settings.model) if classifier is None else classifier.model
    index = None
    if settings.index is not None:
        from staticsem.search import Index

        index = Index.open(settings.index, model=model)
    return create_app(
        model,
        name=settings.model_name,
        index=index,
        limits=settings.limits,
        api_key=settings.api_key(),
        close_index=True,
        classifier=classifier,
    )


def app_from_env() -> FastAPI:
    """The app factory uvicorn's worker processes call (settings in ``STATICSEM_SERVE_SETTINGS``)."""
    return app_from_settings(ServeSettings.from_json(os.environ[SETTINGS_ENV]))
