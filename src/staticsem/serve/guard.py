"""What stands between the network and the handlers: body checks, and errors as one-line JSON.

Every error, ours or the framework's, is answered as ``{"error": {"message", "type", "limit"}}``;
unexpected exceptions are logged here and answered 500 without a stack trace.
"""

from __future__ import annotations

import asyncio
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from staticsem.errors import StaticsemError

logger = logging.getLogger(__name__)

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class ApiError(Exception):
    """A request the server refuses: HTTP status, one-line message, error type, and the limit if any."""

    def __init__(self, status: int, message: str, type: str = "invalid_request", limit: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.limit = status, message, type, limit


class LimitError(ApiError):
    """A request over one of the configured limits (named in the answer)."""

    def __init__(self, limit: str, message: str, status: int = 422):
        super().__init__(status, f"{message} (limit {limit})", "limit_exceeded", limit)


def error_json(error: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": error.message, "type": error.type, "limit": error.limit}}
    return JSONResponse(body, status_code=error.status, headers=headers)


def _validation_message(exc: RequestValidationError) -> str:
    """The first problem as ``where: what`` (never echoing the offending input)."""
    errors = exc.errors()
    if not errors:
        return "invalid request"
    # A refused value of the right type says more than "should be a str" from a union's other arm.
    first = min(errors, key=lambda error: str(error.get("type", "")).endswith("_type"))
    if first.get("type") == "json_invalid":
        return f"body is not valid JSON: {first.get('ctx', {}).get('error', 'parse error')}"
    where = ".".join(str(part) for part in first.get("loc", ()) if not _union_arm(part))
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{more}"


def _union_arm(part: object) -> bool:
    """pydantic names a union's arm in an error's location (``str``, ``list[str]``, a model): not a field."""
    return isinstance(part, str) and (
        "[" in part or part[:1].isupper() or part in {"str", "int", "float", "bool"}
    )


_HTTP_TYPES = {401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed"}


def install_error_handlers(app: FastAPI) -> None:
    """Map every exception to the one error shape."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_json(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_json(ApiError(422, _validation_message(exc)))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        kind = _HTTP_TYPES.get(exc.status_code, "invalid_request")
        return error_json(ApiError(exc.status_code, str(exc.detail), kind), getattr(exc, "headers", None))

    @app.exception_handler(StaticsemError)
    async def bad_input(request: Request, exc: StaticsemError) -> JSONResponse:
        return error_json(ApiError(422, str(exc)))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("error while answering %s %s", request.method, request.url.path)
        return error_json(ApiError(500, "internal server error (logged on the server)", "internal_error"))


class BodyGuard:
    """ASGI middleware for request bodies: JSON content type (415), size limit (413), UTF-8 (400).

    The body is read here (at most ``max_bytes``) and handed on whole, so a body that lies about its
    length or streams without one is held to the same limit. The content type is checked on
    ``json_routes`` (method, path) only, so other methods still get the router's 405.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, json_routes: frozenset[tuple[str, str]]) -> None:
        self.app, self.max_bytes, self.json_routes = app, max_bytes, json_routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        error = self._length_error(headers)
        if error is None and (scope["method"], scope["path"]) in self.json_routes:
            error = _content_type_error(headers.get("content-type", ""))
        body = b""
        if error is None:
            result = await self._read(receive)
            if result is None:  # the client went away
                return
            body, error = result
        if error is not None:
            await error_json(error, {"Connection": "close"})(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _length_error(self, headers: dict[str, str]) -> ApiError | None:
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            return self._too_large(int(length))
        return None

    def _too_large(self, size: int) -> LimitError:
        return LimitError("max_body_bytes", f"body is {size:,}+ bytes, over {self.max_bytes:,}", 413)

    async def _read(self, receive: Receive) -> tuple[bytes, ApiError | None] | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return b"", self._too_large(size)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return b"", ApiError(400, f"body is not valid UTF-8 (byte {exc.start})")
        return body, None


def _content_type_error(content_type: str) -> ApiError | None:
    media = content_type.split(";", 1)[0].strip().lower()
    if media == "application/json" or (media.startswith("application/") and media.endswith("+json")):
        return None
    shown = media or "none"
    return ApiError(
        415, f"content type {shown!r} is not supported; send application/json", "unsupported_media"
    )


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the buffered body once, then whatever the connection says next."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class InFlight:
    """ASGI middleware: at most ``limit`` requests are answered at once; the others wait their turn.

    A request holds its slot from its handler's start until its answer is written (uvicorn's ``send``
    waits while the connection's write buffer is full), so a burst of large answers is built and
    buffered ``limit`` at a time instead of all at once. Bodies are read before (``BodyGuard`` sits
    outside), so a slow sender never holds a slot. ``/health`` does not wait; paths under ``own_lane``
    (the index writes) take slots of their own, so a write never queues behind a crowd of searches.
    """

    def __init__(self, app: ASGIApp, limit: int, own_lane: tuple[str, ...] = ()) -> None:
        self.app, self.limit, self.own_lane = app, limit, own_lane
        self._slots: dict[bool, asyncio.Semaphore] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == "/health":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a semaphore serves one event loop
            self._slots, self._loop = {}, loop
        lane = scope["path"].startswith(self.own_lane) if self.own_lane else False
        slots = self._slots.get(lane)
        if slots is None:
            slots = self._slots[lane] = asyncio.Semaphore(self.limit)
        async with slots:
            await self.app(scope, receive, send)
